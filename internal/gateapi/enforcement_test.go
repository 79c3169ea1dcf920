package gateapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/decisionlog/decisionlogtest"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
	"github.com/intutic/gate-operator/internal/testutil"
)

// trail is the decision records an API writes, kept for the test.
type trail struct {
	w   *decisionlog.Writer
	out testutil.SyncBuffer
}

// auditedAPI serves the coding-agents rules in a policy set to Audit, with its records and
// metrics kept for the test.
func auditedAPI(t *testing.T) (*apiFixture, *trail) {
	t.Helper()
	logs := &logSink{}
	tr := &trail{}
	tr.w = decisionlog.NewWriter(&tr.out, decisionlog.WriterOptions{})
	t.Cleanup(tr.w.Close)
	reg := prometheus.NewRegistry()
	api := &API{
		Gate:      gatetest.AuditedCodingAgents(t),
		Auth:      &Authenticator{Reviewer: fakeReviewer{tok: "system:serviceaccount:agents:orchestrator"}, Allowed: []string{"agents/orchestrator"}},
		Decisions: decisionlog.New(tr.w, decisionlog.Source{ReportedBy: decisionlog.ReportedByConfirmer}, reg),
		Gatherer:  reg,
		Log:       logs.logger(),
	}
	srv, metrics := httptest.NewServer(api.Handler()), httptest.NewServer(api.MetricsHandler())
	t.Cleanup(srv.Close)
	t.Cleanup(metrics.Close)
	return &apiFixture{srv: srv, metrics: metrics}, tr
}

// assertWouldBlockLine finds the audit record of rm -rf / under the audited coding-agents
// rules, from the authenticated caller, among records the schema admits.
func assertWouldBlockLine(t *testing.T, tr *trail, surface string) {
	t.Helper()
	tr.w.Flush()
	for _, r := range decisionlogtest.ValidateLines(t, tr.out.String()) {
		if r.Surface == surface && r.Verdict == "Allow" && r.Enforcement == "audit" && r.Caller == "agents/orchestrator" && r.ServiceAccount == "agents/orchestrator" && r.Would != nil &&
			*r.Would == (decisionlog.WouldRecord{Verdict: "Block", Rule: "no-root-rm", Code: "destructive_command", Reason: "destructive command on the root filesystem"}) {
			return
		}
	}
	t.Fatalf("no would-block audit record for %s in:\n%s", surface, tr.out.String())
}

// TestAuditedBlockOnEachRoute: a Block rule in a policy set to Audit lets the call through on
// every route of the gate API, the answer says what would have been blocked, and the audit
// line says would-block.
func TestAuditedBlockOnEachRoute(t *testing.T) {
	rm := `{"command":"rm -rf /"}`
	wouldBlock := func(t *testing.T, w any) {
		t.Helper()
		m, _ := w.(map[string]any)
		if m["verdict"] != "Block" || m["rule"] != "no-root-rm" || m["code"] != "destructive_command" || m["reason"] != "destructive command on the root filesystem" {
			t.Fatalf("would %v, want the Block of no-root-rm", w)
		}
	}

	t.Run("guard", func(t *testing.T) {
		f, logs := auditedAPI(t)
		status, out := f.call(t, "POST", "/v1/guard", tok, `{"tool":"Bash","input":`+rm+`}`)
		if status != 200 || out["verdict"] != "Allow" || out["message"] != nil {
			t.Fatalf("%d %v, want an Allow", status, out)
		}
		wouldBlock(t, out["would"])
		assertWouldBlockLine(t, logs, gate.SurfaceAPI)
	})

	t.Run("harness approvals", func(t *testing.T) {
		f, logs := auditedAPI(t)
		status, out := f.call(t, "POST", "/v1/harness/approvals", tok, `{"pendingApprovals":[
			{"type":"tool-approval-request","approvalId":"toolu_1","toolCall":{"type":"tool-call","toolCallId":"toolu_1","toolName":"bash","input":`+rm+`,"providerExecuted":true}}]}`)
		conts, _ := out["toolApprovalContinuations"].([]any)
		if status != 200 || len(conts) != 1 || len(out["pending"].([]any)) != 0 {
			t.Fatalf("%d %v", status, out)
		}
		c := conts[0].(map[string]any)
		if c["approved"] != true || c["reason"] != "[Intutic Governance] AUDIT: would block: destructive command on the root filesystem" ||
			c["approvalResponse"].(map[string]any)["approved"] != true {
			t.Fatalf("continuation %v, want an approval noting the would-block", c)
		}
		wouldBlock(t, c["would"])
		assertWouldBlockLine(t, logs, gate.SurfaceHarness)
	})

	t.Run("workflow needs-approval", func(t *testing.T) {
		f, logs := auditedAPI(t)
		status, out := f.call(t, "POST", "/v1/workflow/needs-approval", tok, `{"toolName":"bash","toolCallId":"c1","input":`+rm+`}`)
		if status != 200 || out["needsApproval"] != false {
			t.Fatalf("%d %v, want needsApproval false", status, out)
		}
		wouldBlock(t, out["would"])
		assertWouldBlockLine(t, logs, gate.SurfaceWorkflow)
		metrics := scrape(t, f)
		for _, want := range []string{
			`gate_decisions_total{mode="audit",surface="workflow",verdict="Allow"} 1`,
			`gate_audited_decisions_total{surface="workflow",verdict="Block"} 1`,
		} {
			if !strings.Contains(metrics, want) {
				t.Fatalf("metrics lack %s:\n%s", want, metrics)
			}
		}
	})
}

func scrape(t *testing.T, f *apiFixture) string {
	t.Helper()
	resp, err := http.Get(f.metrics.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}
