package decisionlog

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/intutic/gate-operator/internal/gate"
)

// Record is what is kept of one decision. Verdict is the verdict in effect; Mode is "audit"
// when an Ask or Block was recorded and not enforced, and the Would fields then say which
// (WouldVerdict "Block" is a would-block). ToolUseID and Caller are the call's Origin.
type Record struct {
	IncidentID, Surface, Tool, Verdict, Rule, Code, Reason, SnapshotDigest, Session, ToolUseID string
	// Layer is the layer that decided, for a layered bundle's decisions (gate.Decision.Layer).
	Layer                                           string
	Caller                                          string
	Mode                                            string
	WouldVerdict, WouldRule, WouldCode, WouldReason string
	InputBytes                                      int
	InputSHA256                                     string
}

// Origin is what a surface knows of a call beyond its gate.Call; each field set is written on
// the record and its line.
type Origin struct {
	// ToolUseID is the Managed Agents tool-use id the confirmer answers.
	ToolUseID string
	// Caller is who called the gate API: the ServiceAccount TokenReview authenticated, or
	// "insecure-no-auth".
	Caller string
}

// recordOf builds the record of a decision from the call, its raw input and its origin.
func recordOf(d gate.Decision, c *gate.Call, rawInput []byte, o Origin) Record {
	sum := sha256.Sum256(rawInput)
	rec := Record{
		IncidentID: d.IncidentID, Surface: c.Surface, Tool: gate.CanonicalToolName(c.Tool, c.Server),
		Verdict: string(d.Verdict), Rule: d.Rule, Code: d.Code, Reason: d.Reason, SnapshotDigest: d.SnapshotDigest, Layer: d.Layer,
		Session: c.Session, ToolUseID: o.ToolUseID, Caller: o.Caller, Mode: modeLabel(d),
		InputBytes: len(rawInput), InputSHA256: hex.EncodeToString(sum[:]),
	}
	if w := d.Would; w != nil {
		rec.WouldVerdict, rec.WouldRule, rec.WouldCode, rec.WouldReason = string(w.Verdict), w.Rule, w.Code, w.Reason
	}
	return rec
}

// keysAndValues is the record as the decision line spells it, in the line's order; the Would
// fields only in mode audit, the origin's fields only when set.
func (rec Record) keysAndValues() []any {
	kv := []any{"incidentId", rec.IncidentID, "surface", rec.Surface, "tool", rec.Tool, "verdict", rec.Verdict, "mode", rec.Mode,
		"rule", rec.Rule, "code", rec.Code, "reason", rec.Reason}
	if rec.Mode == "audit" {
		kv = append(kv, "wouldVerdict", rec.WouldVerdict, "wouldRule", rec.WouldRule, "wouldCode", rec.WouldCode, "wouldReason", rec.WouldReason)
	}
	if rec.Layer != "" {
		kv = append(kv, "layer", rec.Layer)
	}
	kv = append(kv, "snapshotDigest", rec.SnapshotDigest, "session", rec.Session, "inputBytes", rec.InputBytes, "inputSha256", rec.InputSHA256)
	if rec.ToolUseID != "" {
		kv = append(kv, "toolUseId", rec.ToolUseID)
	}
	if rec.Caller != "" {
		kv = append(kv, "caller", rec.Caller)
	}
	return kv
}

// modeLabel is a decision's mode as the line and the metrics spell it: enforce or audit.
func modeLabel(d gate.Decision) string {
	if d.Mode() == gate.Audit {
		return "audit"
	}
	return "enforce"
}
