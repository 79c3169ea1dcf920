package gateapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

// identityGate blocks production deploys unless the caller is the orchestrator of the policy's
// namespace, and asks for any call whose caller the rules cannot name.
func identityGate(t *testing.T) *gate.Gate {
	return gatetest.Gate(t,
		gate.Rule{Name: "orchestrator-deploys", Tools: []string{"deploy"}, Action: gate.Block, Reason: "only the orchestrator deploys",
			When: `caller.serviceAccount != caller.namespace + "/orchestrator"`},
		gate.Rule{Name: "anonymous", When: `caller.serviceAccount == "" && caller.pod == "" && caller.agent == ""`, Action: gate.Ask, Reason: "an anonymous caller"},
	)
}

// TestCallerServiceAccountOnEachRoute: on every route the rules see the ServiceAccount that
// TokenReview authenticated, as namespace/name, and the request cannot say otherwise.
func TestCallerServiceAccountOnEachRoute(t *testing.T) {
	f := newAPI(t, identityGate(t))
	routes := []struct {
		name, path string
		body       func(tool string) string
		verdict    func(out map[string]any, status int) string
	}{
		{"guard", "/v1/guard", func(tool string) string { return `{"tool":"` + tool + `","input":{}}` },
			func(out map[string]any, _ int) string { v, _ := out["verdict"].(string); return v }},
		{"workflow", "/v1/workflow/needs-approval", func(tool string) string { return `{"toolName":"` + tool + `","input":{}}` },
			func(out map[string]any, status int) string {
				switch {
				case status == 403:
					return "Block"
				case out["needsApproval"] == true:
					return "Ask"
				}
				return "Allow"
			}},
		{"harness", "/v1/harness/approvals", func(tool string) string {
			return `{"pendingApprovals":[{"type":"tool-approval-request","approvalId":"a1","toolCall":{"type":"tool-call","toolCallId":"a1","toolName":"` + tool + `","input":{}}}]}`
		}, func(out map[string]any, _ int) string {
			if p, _ := out["pending"].([]any); len(p) == 1 {
				return "Ask"
			}
			c, _ := out["toolApprovalContinuations"].([]any)
			if len(c) == 1 && c[0].(map[string]any)["approved"] == true {
				return "Allow"
			}
			return "Block"
		}},
	}
	// A caller of another namespace, allowed to call the API, is not the orchestrator.
	api := &API{Gate: identityGate(t), Log: logr.Discard(), Auth: &Authenticator{
		Reviewer: fakeReviewer{"builder": "system:serviceaccount:tools:orchestrator"}, Allowed: []string{"tools/*"}}}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	other := &apiFixture{srv: srv}

	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			for _, c := range []struct {
				f           *apiFixture
				token, tool string
				want        string
			}{
				{f, tok, "deploy", "Allow"},           // agents/orchestrator
				{f, tok, "read", "Allow"},             // a named caller is not anonymous
				{other, "builder", "deploy", "Block"}, // tools/orchestrator
			} {
				status, out := c.f.call(t, "POST", r.path, c.token, r.body(c.tool))
				if got := r.verdict(out, status); got != c.want {
					t.Errorf("%s calling %s: %s, want %s (%d %v)", c.token, c.tool, got, c.want, status, out)
				}
			}
		})
	}

	// The body cannot name a caller: the request is refused, not decided.
	status, out := f.call(t, "POST", "/v1/guard", tok, `{"tool":"deploy","caller":{"serviceAccount":"agents/orchestrator"}}`)
	if status != 400 || !strings.Contains(out["error"].(string), `unknown field "caller"`) {
		t.Fatalf("a caller in the body: %d %v", status, out)
	}
}

// TestCallerWithoutAuthentication: under --insecure-no-auth nobody is authenticated, so the
// rules see no ServiceAccount (not the placeholder the audit line carries).
func TestCallerWithoutAuthentication(t *testing.T) {
	api := &API{Gate: identityGate(t), Log: logr.Discard()}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	f := &apiFixture{srv: srv}
	if status, out := f.call(t, "POST", "/v1/guard", "", `{"tool":"read","input":{}}`); status != 200 || out["verdict"] != "Ask" || out["rule"] != "anonymous" {
		t.Fatalf("read: %d %v", status, out)
	}
	if status, out := f.call(t, "POST", "/v1/guard", "", `{"tool":"deploy","input":{}}`); status != 200 || out["verdict"] != "Block" {
		t.Fatalf("deploy: %d %v", status, out)
	}
}
