package decisionlog_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/decisionlog/decisionlogtest"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestRecords: the record of a decision, as the confirmer and the gate API write it, is one
// NDJSON line the schema admits, field for field what the decision, the call, the surface's
// origin and the Recorder's source say, and never the input.
func TestRecords(t *testing.T) {
	enforced := decisionlog.Refusal{Verdict: gate.Block, Rule: "no-root-rm", Code: "destructive_command", Reason: "destructive command on the root filesystem",
		IncidentID: "inc_1", Message: gate.RefusalPrefix + "destructive command on the root filesystem", SnapshotDigest: "sha256:abc"}
	audited := decisionlog.Refusal{Verdict: gate.Allow, Reason: "allowed", IncidentID: "inc_2", SnapshotDigest: "sha256:abc",
		Would: &gate.AuditedVerdict{Verdict: gate.Ask, Rule: "deploys-need-human", Reason: "deploys need a human"}}
	layered := decisionlog.Refusal{Verdict: gate.Block, Rule: "no-curl", Reason: "no curl", IncidentID: "inc_3", SnapshotDigest: "sha256:idx",
		Layer: "ClusterHarnessAgentPolicy/baseline", Exceptions: []string{"agents/tmp-curl"},
		Layers: []gate.LayerVerdict{{Layer: "ClusterHarnessAgentPolicy/baseline", Verdict: gate.Block, Rule: "no-curl", SnapshotDigest: "sha256:base"},
			{Layer: "HarnessAgentPolicy/agents/p", Verdict: gate.Allow, SnapshotDigest: "sha256:ns"}}}
	src := decisionlog.Source{ReportedBy: decisionlog.ReportedByConfirmer, Namespace: "agents", Policy: "agents/p", Confirmer: "c"}
	for _, c := range []struct {
		name string
		g    decisionlog.Gate
		call gate.Call
		raw  string
		o    decisionlog.Origin
		want decisionlog.Record
	}{
		{"managed agents", enforced, gate.Call{Tool: "bash", Surface: gate.SurfaceManagedAgents, Session: "sesn_1", Caller: gate.Caller{Agent: "agent_1"}}, `{"command":"rm -rf /SECRET"}`, decisionlog.Origin{ToolUseID: "toolu_1"},
			decisionlog.Record{DecisionID: "inc_1", Surface: "managed-agents", ReportedBy: "confirmer", Namespace: "agents", Policy: "agents/p", Confirmer: "c", Agent: "agent_1",
				Session: "sesn_1", ToolUseID: "toolu_1", Digest: "sha256:abc", Rule: "no-root-rm", Verdict: "Block", Enforcement: "enforce",
				Code: "destructive_command", Reason: "destructive command on the root filesystem", Tool: "bash", InputBytes: 28}},
		{"gate api, audited", audited, gate.Call{Tool: "run", Server: "deploy", Surface: gate.SurfaceHarness, Caller: gate.Caller{ServiceAccount: "agents/orchestrator"}}, `{}`, decisionlog.Origin{Caller: "agents/orchestrator"},
			decisionlog.Record{DecisionID: "inc_2", Surface: "harness", ReportedBy: "confirmer", Namespace: "agents", Policy: "agents/p", Confirmer: "c",
				ServiceAccount: "agents/orchestrator", Caller: "agents/orchestrator", Digest: "sha256:abc", Verdict: "Allow", Enforcement: "audit",
				Would: &decisionlog.WouldRecord{Verdict: "Ask", Rule: "deploys-need-human", Reason: "deploys need a human"}, Reason: "allowed", Tool: "mcp__deploy__run", InputBytes: 2}},
		{"gate api, layered", layered, gate.Call{Tool: "Bash", Surface: gate.SurfaceWorkflow}, `{"command":"curl x"}`, decisionlog.Origin{Caller: "insecure-no-auth"},
			decisionlog.Record{DecisionID: "inc_3", Surface: "workflow", ReportedBy: "confirmer", Namespace: "agents", Policy: "agents/p", Confirmer: "c", Caller: "insecure-no-auth",
				Digest: "sha256:idx", Layer: "ClusterHarnessAgentPolicy/baseline", Layers: []decisionlog.LayerRecord{
					{Layer: "ClusterHarnessAgentPolicy/baseline", Digest: "sha256:base", Verdict: "Block", Rule: "no-curl"},
					{Layer: "HarnessAgentPolicy/agents/p", Digest: "sha256:ns", Verdict: "Allow"}},
				Rule: "no-curl", Verdict: "Block", Enforcement: "enforce", Reason: "no curl", Exceptions: []string{"agents/tmp-curl"}, Tool: "Bash", InputBytes: 20}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out testutil.SyncBuffer
			var kept decisionlog.Memory
			w := decisionlog.NewWriter(&out, decisionlog.WriterOptions{})
			r := decisionlog.New(w, src, nil, &kept)
			if d := r.Evaluate(c.g, &c.call, []byte(c.raw), c.o); d.IncidentID != c.g.Decide(nil).IncidentID {
				t.Fatalf("decision %+v", d)
			}
			w.Close()
			if strings.Contains(out.String(), "SECRET") || strings.Contains(out.String(), "curl x") {
				t.Fatalf("a record holds the input: %s", out.String())
			}
			recs := decisionlogtest.ValidateLines(t, out.String())
			if len(recs) != 1 || len(kept.Records()) != 1 {
				t.Fatalf("%d records written, %d emitted, want 1", len(recs), len(kept.Records()))
			}
			got := recs[0]
			sum := sha256.Sum256([]byte(c.raw))
			if got.InputSHA256 != hex.EncodeToString(sum[:]) || got.Time == "" {
				t.Fatalf("record %+v", got)
			}
			c.want.Schema, c.want.Time, c.want.InputSHA256, c.want.LatencyUS = decisionlog.Schema, got.Time, got.InputSHA256, got.LatencyUS
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("record\n%+v\nwant\n%+v", got, c.want)
			}
		})
	}
}

// TestMetrics: every decision is counted by surface, verdict and mode, an audited one also by
// the verdict it would have had, and timed by surface.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := decisionlog.New(nil, decisionlog.Source{}, reg)
	allow := decisionlog.Refusal{Verdict: gate.Allow}
	wouldBlock := decisionlog.Refusal{Verdict: gate.Allow, Would: &gate.AuditedVerdict{Verdict: gate.Block}}
	r.Evaluate(allow, &gate.Call{Surface: gate.SurfaceAPI}, nil, decisionlog.Origin{})
	r.Evaluate(wouldBlock, &gate.Call{Surface: gate.SurfaceManagedAgents}, nil, decisionlog.Origin{})
	r.Evaluate(wouldBlock, &gate.Call{Surface: gate.SurfaceManagedAgents}, nil, decisionlog.Origin{})
	want := []string{
		`gate_audited_decisions_total{surface="managed-agents",verdict="Block"} 2`,
		`gate_decision_duration_seconds{surface="api"} 1`,
		`gate_decision_duration_seconds{surface="managed-agents"} 2`,
		`gate_decisions_total{mode="audit",surface="managed-agents",verdict="Allow"} 2`,
		`gate_decisions_total{mode="enforce",surface="api",verdict="Allow"} 1`,
	}
	if got := series(t, reg); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("series\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// series are the gathered series as name{labels} value, labels in alphabetical order; a
// histogram's value is its count.
func series(t *testing.T, reg prometheus.Gatherer) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			v := m.GetCounter().GetValue()
			if h := m.GetHistogram(); h != nil {
				v = float64(h.GetSampleCount())
			}
			out = append(out, fmt.Sprintf("%s{%s} %v", mf.GetName(), strings.Join(labels, ","), v))
		}
	}
	return out
}

// TestUndecodableInputIsRefused: input that does not decode is refused with input_invalid
// without asking the gate, and recorded like any other decision.
func TestUndecodableInputIsRefused(t *testing.T) {
	var kept decisionlog.Memory
	r := decisionlog.New(nil, decisionlog.Source{}, nil, &kept)
	asked := decisionlog.Refusal{Verdict: gate.Allow}
	d := r.EvaluateRaw(asked, &gate.Call{Tool: "write", Surface: gate.SurfaceHarness}, []byte(`{"n":1e999}`), decisionlog.Origin{})
	if d.Verdict != gate.Block || d.Code != gate.CodeInputInvalid {
		t.Fatalf("decision %+v, want an input_invalid Block", d)
	}
	if recs := kept.Records(); len(recs) != 1 || recs[0].Code != gate.CodeInputInvalid || recs[0].Verdict != "Block" || recs[0].InputBytes != 11 {
		t.Fatalf("records %+v", recs)
	}
	c := &gate.Call{Tool: "write", Surface: gate.SurfaceHarness}
	if d := r.EvaluateRaw(asked, c, []byte(`{"file_path":"a"}`), decisionlog.Origin{}); d.Verdict != gate.Allow || c.Input["file_path"] != "a" {
		t.Fatalf("decision %+v of input %v, want the gate's Allow of the rendered input", d, c.Input)
	}
}

// TestNilRecorderDecides: without a Recorder the gate still decides every call.
func TestNilRecorderDecides(t *testing.T) {
	var r *decisionlog.Recorder
	if d := r.Evaluate(decisionlog.Refusal{Verdict: gate.Ask}, &gate.Call{}, nil, decisionlog.Origin{}); d.Verdict != gate.Ask {
		t.Fatalf("decision %+v", d)
	}
}
