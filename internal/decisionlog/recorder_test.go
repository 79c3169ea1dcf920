package decisionlog

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/intutic/gate-operator/internal/gate"
)

// jsonLog is the confirmer's logger (cmd/confirmer: slog's JSON handler behind logr) writing
// to b, without the time.
func jsonLog(b *bytes.Buffer) logr.Logger {
	return logr.FromSlogHandler(slog.NewJSONHandler(b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
}

// TestDecisionLine: the line of a decision, as the confirmer and the gate API write it, byte for
// byte as internal/confirm's Decide wrote it before the Recorder: key for key and in order, the
// would-be verdict only in mode audit, the origin's fields last.
func TestDecisionLine(t *testing.T) {
	enforced := Refusal{Verdict: gate.Block, Rule: "no-root-rm", Code: "destructive_command", Reason: "destructive command on the root filesystem",
		IncidentID: "inc_1", Message: gate.RefusalPrefix + "destructive command on the root filesystem", SnapshotDigest: "sha256:abc"}
	audited := Refusal{Verdict: gate.Allow, Reason: "allowed", IncidentID: "inc_2", SnapshotDigest: "sha256:abc",
		Would: &gate.AuditedVerdict{Verdict: gate.Ask, Rule: "deploys-need-human", Reason: "deploys need a human"}}
	for _, c := range []struct {
		name, logger string
		g            Gate
		call         gate.Call
		raw          string
		o            Origin
		want         string
	}{
		{"managed agents", "confirmer", enforced, gate.Call{Tool: "bash", Surface: gate.SurfaceManagedAgents, Session: "sesn_1"}, `{"command":"rm -rf /"}`, Origin{ToolUseID: "toolu_1"},
			`{"level":"INFO","msg":"decision","logger":"confirmer","incidentId":"inc_1","surface":"managed-agents","tool":"bash","verdict":"Block","mode":"enforce","rule":"no-root-rm","code":"destructive_command","reason":"destructive command on the root filesystem","snapshotDigest":"sha256:abc","session":"sesn_1","inputBytes":22,"inputSha256":"2f3b94579f43fb59e8df8ecf8d8a231a288b641d262c4c425043c107e8e72b82","toolUseId":"toolu_1"}`},
		{"gate api, audited", "gate", audited, gate.Call{Tool: "run", Server: "deploy", Surface: gate.SurfaceHarness}, `{}`, Origin{Caller: "agents/orchestrator"},
			`{"level":"INFO","msg":"decision","logger":"gate","incidentId":"inc_2","surface":"harness","tool":"mcp__deploy__run","verdict":"Allow","mode":"audit","rule":"","code":"","reason":"allowed","wouldVerdict":"Ask","wouldRule":"deploys-need-human","wouldCode":"","wouldReason":"deploys need a human","snapshotDigest":"sha256:abc","session":"","inputBytes":2,"inputSha256":"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","caller":"agents/orchestrator"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			var kept Memory
			r := New(jsonLog(&b), nil, &kept).Named(c.logger)
			if d := r.Evaluate(c.g, &c.call, []byte(c.raw), c.o); d.IncidentID != c.g.Decide(nil).IncidentID {
				t.Fatalf("decision %+v", d)
			}
			if got := strings.TrimSuffix(b.String(), "\n"); got != c.want {
				t.Fatalf("line\n%s\nwant\n%s", got, c.want)
			}
			recs := kept.Records()
			if len(recs) != 1 || recs[0].ToolUseID != c.o.ToolUseID || recs[0].Caller != c.o.Caller || !strings.Contains(c.want, `"inputSha256":"`+recs[0].InputSHA256+`"`) {
				t.Fatalf("records %+v", recs)
			}
		})
	}
}

// TestMetrics: every decision is counted by surface, verdict and mode, an audited one also by
// the verdict it would have had, and timed by surface; Recorders Named from one New share them.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := New(logr.Discard(), reg)
	allow := Refusal{Verdict: gate.Allow}
	wouldBlock := Refusal{Verdict: gate.Allow, Would: &gate.AuditedVerdict{Verdict: gate.Block}}
	r.Named("gate").Evaluate(allow, &gate.Call{Surface: gate.SurfaceAPI}, nil, Origin{})
	r.Named("confirmer").Evaluate(wouldBlock, &gate.Call{Surface: gate.SurfaceManagedAgents}, nil, Origin{})
	r.Evaluate(wouldBlock, &gate.Call{Surface: gate.SurfaceManagedAgents}, nil, Origin{})
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
	var kept Memory
	r := New(logr.Discard(), nil, &kept)
	asked := Refusal{Verdict: gate.Allow}
	d := r.EvaluateRaw(asked, &gate.Call{Tool: "write", Surface: gate.SurfaceHarness}, []byte(`{"n":1e999}`), Origin{})
	if d.Verdict != gate.Block || d.Code != gate.CodeInputInvalid {
		t.Fatalf("decision %+v, want an input_invalid Block", d)
	}
	if recs := kept.Records(); len(recs) != 1 || recs[0].Code != gate.CodeInputInvalid || recs[0].Verdict != "Block" || recs[0].InputBytes != 11 {
		t.Fatalf("records %+v", recs)
	}
	c := &gate.Call{Tool: "write", Surface: gate.SurfaceHarness}
	if d := r.EvaluateRaw(asked, c, []byte(`{"file_path":"a"}`), Origin{}); d.Verdict != gate.Allow || c.Input["file_path"] != "a" {
		t.Fatalf("decision %+v of input %v, want the gate's Allow of the rendered input", d, c.Input)
	}
}

// TestNilRecorderDecides: without a Recorder the gate still decides every call.
func TestNilRecorderDecides(t *testing.T) {
	var r *Recorder
	if d := r.Named("gate").Evaluate(Refusal{Verdict: gate.Ask}, &gate.Call{}, nil, Origin{}); d.Verdict != gate.Ask {
		t.Fatalf("decision %+v", d)
	}
}
