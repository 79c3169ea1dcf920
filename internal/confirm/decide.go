package confirm

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/go-logr/logr"

	"github.com/intutic/gate-operator/internal/gate"
)

// Decider is the gate as the confirmer and the gate HTTP API use it.
type Decider interface {
	Decide(*gate.Call) gate.Decision
}

// AuditRecord is what the audit log keeps of a decision: never the input, only its size and
// hash. The reason comes from the rule (or the gate's own refusal), not from the input.
// Verdict is the verdict in effect; Mode is "audit" when an Ask or Block was recorded and not
// enforced, and the Would fields then say which (WouldVerdict "Block" is a would-block).
type AuditRecord struct {
	IncidentID, Surface, Tool, Verdict, Rule, Code, Reason, SnapshotDigest, Session, ToolUseID string
	Mode                                                                                       string
	WouldVerdict, WouldRule, WouldCode, WouldReason                                            string
	InputBytes                                                                                 int
	InputSHA256                                                                                string
}

// modeLabel is a decision's mode as the audit line and the metrics spell it: enforce or audit.
func modeLabel(d gate.Decision) string {
	if d.Mode() == gate.Audit {
		return "audit"
	}
	return "enforce"
}

// auditOf builds the audit record of a decision from the call and its raw input.
func auditOf(d gate.Decision, c *gate.Call, rawInput []byte) AuditRecord {
	sum := sha256.Sum256(rawInput)
	rec := AuditRecord{
		IncidentID: d.IncidentID, Surface: c.Surface, Tool: gate.CanonicalToolName(c.Tool, c.Server),
		Verdict: string(d.Verdict), Rule: d.Rule, Code: d.Code, Reason: d.Reason, SnapshotDigest: d.SnapshotDigest,
		Session: c.Session, Mode: modeLabel(d), InputBytes: len(rawInput), InputSHA256: hex.EncodeToString(sum[:]),
	}
	if w := d.Would; w != nil {
		rec.WouldVerdict, rec.WouldRule, rec.WouldCode, rec.WouldReason = string(w.Verdict), w.Rule, w.Code, w.Reason
	}
	return rec
}

// DecideRaw renders a call's input from its JSON encoding (gate.RenderRawInput) and decides
// the call. Input that does not decode is refused with input_invalid without consulting the
// gate, and is counted and audited like any other decision.
func DecideRaw(g Decider, m *Metrics, log logr.Logger, c *gate.Call, rawInput []byte, extra ...any) (gate.Decision, AuditRecord) {
	input, err := gate.RenderRawInput(rawInput)
	if err != nil {
		return Decide(refused(gate.Refuse(gate.CodeInputInvalid, err.Error())), m, log, c, rawInput, extra...)
	}
	c.Input = input
	return Decide(g, m, log, c, rawInput, extra...)
}

// refused is a Decider that answers every call with one refusal.
type refused gate.Decision

func (r refused) Decide(*gate.Call) gate.Decision { return gate.Decision(r) }

// Decide runs the gate for one call on any surface (Managed Agents, harness, workflow, the
// guard route): the one place a decision is timed and counted (in m, when set) and written as
// an audit line to log. rawInput is the input as it arrived: hashed and measured, never
// logged. extra are further key/value pairs for the audit line (the tool-use id, the caller).
// A decision that let an Ask or Block through (Audit) has mode "audit" on its line and in its
// count, and its line carries the would-be verdict, rule, code and reason.
func Decide(g Decider, m *Metrics, log logr.Logger, c *gate.Call, rawInput []byte, extra ...any) (gate.Decision, AuditRecord) {
	start := time.Now()
	d := g.Decide(c)
	if m != nil {
		m.DecisionLatency.WithLabelValues(c.Surface).Observe(time.Since(start).Seconds())
		m.Decisions.WithLabelValues(c.Surface, string(d.Verdict), modeLabel(d)).Inc()
		if d.Would != nil {
			m.AuditedDecisions.WithLabelValues(c.Surface, string(d.Would.Verdict)).Inc()
		}
	}
	rec := auditOf(d, c, rawInput)
	kv := []any{"incidentId", rec.IncidentID, "surface", rec.Surface, "tool", rec.Tool, "verdict", rec.Verdict, "mode", rec.Mode,
		"rule", rec.Rule, "code", rec.Code, "reason", rec.Reason}
	if d.Would != nil {
		kv = append(kv, "wouldVerdict", rec.WouldVerdict, "wouldRule", rec.WouldRule, "wouldCode", rec.WouldCode, "wouldReason", rec.WouldReason)
	}
	kv = append(append(kv, "snapshotDigest", rec.SnapshotDigest, "session", rec.Session,
		"inputBytes", rec.InputBytes, "inputSha256", rec.InputSHA256), extra...)
	log.Info("decision", kv...)
	return d, rec
}
