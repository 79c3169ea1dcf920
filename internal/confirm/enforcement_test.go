package confirm

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/decisionlog/decisionlogtest"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestConfirmerAuditedBlockIsAllowed: under a policy set to Audit, the Managed Agents
// confirmer allows a call a Block rule matches (and one an Ask rule matches, without holding
// it for a human); the audit line and record say would-block and would-ask.
func TestConfirmerAuditedBlockIsAllowed(t *testing.T) {
	f := newFake(t)
	ids := f.AddSession("sesn_a", "agent_1",
		anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "rm -rf /"}, Permission: "ask"},
		anthropictest.ToolUse{Type: "agent.mcp_tool_use", MCPServer: "deploy", Name: "run", Input: map[string]any{}, Permission: "ask"},
	)
	c := newConfirmer(t, f)
	c.Gate = gatetest.AuditedCodingAgents(t)
	var out testutil.SyncBuffer
	trail := decisionlog.NewWriter(&out, decisionlog.WriterOptions{})
	defer trail.Close()
	reg := prometheus.NewRegistry()
	var decided decisionlog.Memory
	c.Decisions = decisionlog.New(trail, decisionlog.Source{ReportedBy: decisionlog.ReportedByConfirmer}, reg, &decided)

	answered, err := c.AnswerSession(context.Background(), "sesn_a")
	if err != nil {
		t.Fatal(err)
	}
	got := confirmations(t, f, "sesn_a")
	if got[ids[0]] != "allow" || got[ids[1]] != "allow" || answered.Held != 0 {
		t.Fatalf("confirmations %v, held %d: want both allowed, none held", got, answered.Held)
	}
	audit := decided.Records()
	if len(audit) != 2 {
		t.Fatalf("audit %+v", audit)
	}
	for i, want := range []decisionlog.WouldRecord{
		{Verdict: "Block", Rule: "no-root-rm", Code: "destructive_command", Reason: "destructive command on the root filesystem"},
		{Verdict: "Ask", Rule: "deploys-need-human", Reason: "deploys need a human"},
	} {
		if r := audit[i]; r.Verdict != "Allow" || r.Enforcement != "audit" || r.Would == nil || *r.Would != want {
			t.Errorf("audit[%d] = %+v, want an audited Allow that would be %+v", i, r, want)
		}
	}
	trail.Flush()
	written := decisionlogtest.ValidateLines(t, out.String())
	if len(written) != 2 || written[0].Would == nil || written[0].Would.Verdict != "Block" || written[0].Session != "sesn_a" || written[0].ToolUseID != ids[0] {
		t.Fatalf("no would-block record in:\n%s", out.String())
	}
	for series, want := range map[string]float64{
		`gate_decisions_total{mode="audit",surface="managed-agents",verdict="Allow"}`:   2,
		`gate_audited_decisions_total{surface="managed-agents",verdict="Block"}`:        1,
		`gate_audited_decisions_total{surface="managed-agents",verdict="Ask"}`:          1,
		`gate_decisions_total{mode="enforce",surface="managed-agents",verdict="Allow"}`: 0,
	} {
		if got := counter(t, reg, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// counter is the value of one counter series, written as the exposition format names it
// (labels in alphabetical order); 0 when there is no such series.
func counter(t *testing.T, reg prometheus.Gatherer, series string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			if mf.GetName()+"{"+strings.Join(labels, ",")+"}" == series {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
