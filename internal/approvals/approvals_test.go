package approvals

import (
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/decisionlog/decisionlogtest"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestApprovalName: one call, one name, readable and DNS-safe; another call, session, surface
// or confirmer, another name.
func TestName(t *testing.T) {
	n := Name("agents", gatev1.SurfaceManagedAgents, "sesn_1", "sevt_1", "mcp__deploy__run", InputDigest([]byte(`{}`)))
	if n != Name("agents", gatev1.SurfaceManagedAgents, "sesn_1", "sevt_1", "mcp__deploy__run", InputDigest([]byte(`{}`))) {
		t.Fatal("the name is not deterministic")
	}
	if !regexp.MustCompile(`^mcp-deploy-run-[0-9a-f]{20}$`).MatchString(n) {
		t.Fatalf("name %q", n)
	}
	for _, other := range []string{
		Name("agents", gatev1.SurfaceManagedAgents, "sesn_1", "sevt_2", "mcp__deploy__run", InputDigest([]byte(`{}`))),
		Name("agents", gatev1.SurfaceManagedAgents, "sesn_2", "sevt_1", "mcp__deploy__run", InputDigest([]byte(`{}`))),
		Name("agents", gatev1.SurfaceHarness, "sesn_1", "sevt_1", "mcp__deploy__run", InputDigest([]byte(`{}`))),
		Name("other", gatev1.SurfaceManagedAgents, "sesn_1", "sevt_1", "mcp__deploy__run", InputDigest([]byte(`{}`))),
	} {
		if strings.HasSuffix(other, n[len(n)-20:]) {
			t.Errorf("%s and %s share a hash", n, other)
		}
	}
	for tool, want := range map[string]string{
		"WebFetch": "webfetch", "": "call", "___": "call", "a_very_long_tool_name_indeed_it_is": "a-very-long-tool-nam", "Ünïcode--x": "n-code-x",
		"abcdefghijklmnopqrs_t": "abcdefghijklmnopqrs",
	} {
		if got := toolSlug(tool); got != want {
			t.Errorf("toolSlug(%q) = %q, want %q", tool, got, want)
		}
	}
}

// TestInputPreview: at most 1024 bytes, cut between characters, truncated said when cut.
func TestInputPreview(t *testing.T) {
	small := []byte(`{"command":"ls"}`)
	if p, tr := inputPreview(small); p != string(small) || tr {
		t.Fatalf("%q %v", p, tr)
	}
	big := []byte(`{"text":"` + strings.Repeat("é", 600) + `"}`) // 1,211 bytes; é is 2
	p, tr := inputPreview(big)
	if !tr || len(p) > 1024 || len(p) < 1022 || !utf8.ValidString(p) || !strings.HasPrefix(string(big), p) {
		t.Fatalf("preview of %d bytes, valid %v, truncated %v", len(p), utf8.ValidString(p), tr)
	}
}

// TestApprovalShowInput: with showInput the approval carries the input's first bytes.
func TestApprovalShowInput(t *testing.T) {
	a := &Store{Namespace: "agents", Confirmer: "agents", ConfirmerUID: "uid-1", Policy: "coding-agents"}
	a.ShowInput = true
	ta := a.Object(Request{Surface: gatev1.SurfaceHarness, ToolUseID: "ap_1", Tool: "deploy", RawInput: []byte(`{"env":"prod"}`), ExpiresAt: time.Now()})
	if ta.Spec.Input.Preview != `{"env":"prod"}` || ta.Spec.Input.Truncated {
		t.Fatalf("input %+v", ta.Spec.Input)
	}
}

// TestApprovalRecordsTheClusterLayer: a call a cluster layer held records that cluster policy
// (its approvers decide it); one the namespace policy held records none.
func TestApprovalRecordsTheClusterLayer(t *testing.T) {
	a := &Store{Namespace: "agents", Confirmer: "agents", ConfirmerUID: "uid-1", Policy: "coding-agents"}
	for layer, want := range map[string]string{
		"ClusterHarnessAgentPolicy/baseline":      "baseline",
		"HarnessAgentPolicy/agents/coding-agents": "",
		"": "",
	} {
		ta := a.Object(Request{Surface: gatev1.SurfaceHarness, ToolUseID: "ap_1", Tool: "deploy", RawInput: []byte(`{}`), ExpiresAt: time.Now(),
			Decision: gate.Decision{Verdict: gate.Ask, Rule: "deploys-ask", Layer: layer}})
		if ta.Spec.ClusterPolicy != want || ta.Spec.Policy != "coding-agents" {
			t.Errorf("layer %q: clusterPolicy %q, policy %q; want %q, coding-agents", layer, ta.Spec.ClusterPolicy, ta.Spec.Policy, want)
		}
	}
}

// TestOutcomeRecords: each outcome is one decision record the schema admits, with the
// verdict the caller got, who answered, and the call it held, never its input.
func TestOutcomeRecords(t *testing.T) {
	var out testutil.SyncBuffer
	w := decisionlog.NewWriter(&out, decisionlog.WriterOptions{})
	a := &Store{Namespace: "agents", Confirmer: "coding-agents", ConfirmerUID: "uid-1", Policy: "coding-agents",
		Trail: decisionlog.New(w, decisionlog.Source{ReportedBy: decisionlog.ReportedByConfirmer, Namespace: "agents", Confirmer: "coding-agents"}, nil)}
	ta := a.Object(Request{Surface: gatev1.SurfaceManagedAgents, Session: "sesn_1", Agent: "agent_1", ToolUseID: "sevt_1", Tool: "bash",
		RawInput: []byte(`{"command":"deploy SECRET"}`), ExpiresAt: time.Now().Add(time.Hour),
		Decision: gate.Decision{Verdict: gate.Ask, Rule: "deploys-ask", Reason: "deploys need a human", SnapshotDigest: "sha256:abc"}})
	approved := ta.DeepCopy()
	approved.Status.State = gatev1.ApprovalApproved
	approved.Status.Decision = &gatev1.ToolApprovalDecision{User: "alice"}
	a.Outcome(approved, EventAllowed, "sent allow")
	expired := ta.DeepCopy()
	expired.Status.State = gatev1.ApprovalExpired
	a.Outcome(expired, EventExpired, "no answer")
	w.Close()
	if strings.Contains(out.String(), "SECRET") {
		t.Fatalf("a record holds the input: %s", out.String())
	}
	recs := decisionlogtest.ValidateLines(t, out.String())
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2:\n%s", len(recs), out.String())
	}
	for i, want := range []struct{ verdict, state, outcome, user string }{{"Allow", "Approved", "Allowed", "alice"}, {"Block", "Expired", "Expired", ""}} {
		r := recs[i]
		if r.Surface != decisionlog.SurfaceToolApproval || r.Verdict != want.verdict || r.Approval == nil || r.Approval.Name != ta.Name ||
			r.Approval.State != want.state || r.Approval.Outcome != want.outcome || r.Approval.User != want.user || r.Rule != "deploys-ask" ||
			r.Session != "sesn_1" || r.Agent != "agent_1" || r.ToolUseID != "sevt_1" || r.Tool != "bash" || r.Policy != "agents/coding-agents" ||
			r.Confirmer != "coding-agents" || r.Digest != "sha256:abc" || r.InputSHA256 != InputDigest([]byte(`{"command":"deploy SECRET"}`)) {
			t.Errorf("record %d: %+v, want %+v", i, r, want)
		}
	}
}
