// Package decisionlog is the decision trail: one Record per decision, the same shape from
// every surface (docs/decision-log.md; its JSON Schema is decision-record.schema.json here), written as NDJSON on
// the deciding component's stdout by a bounded Writer.
//
// The Recorder runs the gate for one call of the confirmer binary, times and counts the
// decision in Prometheus metrics and writes its Record: the Managed Agents confirmer
// (internal/confirm) and the gate HTTP API (internal/gateapi) hold the one Recorder that
// cmd/confirmer builds, and internal/approvals writes the outcome of each ToolApproval through
// it. The gate-agent sidecar (internal/gateagent) writes the records of the hook's calls, and
// reports the decisions gate-hook made while it could not answer, with its own Writer.
//
// A record holds the tool input's size and SHA-256, and the input itself only when the deciding
// policy opted in, masked (input.go): the reason comes from the rule (or the gate's own
// refusal), not from the input. gate-hook writes no record of its own:
// it runs as the agent's user, so anything it wrote the agent could rewrite.
package decisionlog

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intutic/gate-operator/internal/gate"
)

// Sink receives every record, after it is queued for the output. It is called on the goroutine
// that decided the call, so it must not block.
type Sink interface {
	Emit(Record)
}

// Source is what a Recorder stamps on every record: who reports it and for which policy.
type Source struct {
	// ReportedBy is ReportedByConfirmer for the confirmer binary.
	ReportedBy string
	// Namespace and Policy are the policy that decides (Policy: <namespace>/<name>), Confirmer
	// the SessionConfirmer, when known.
	Namespace, Policy, Confirmer string
}

// Recorder builds, counts and writes the record of each decision. A nil Recorder runs the gate
// and records nothing.
type Recorder struct {
	metrics *metrics // nil: not counted
	out     *Writer
	source  Source
	sinks   []Sink
}

// New is a Recorder writing its records with out (nil: none), stamped with src, counting in
// metrics registered with reg (nil: no metrics), and handing every record to sinks.
func New(out *Writer, src Source, reg prometheus.Registerer, sinks ...Sink) *Recorder {
	r := &Recorder{out: out, source: src, sinks: sinks}
	if reg != nil {
		r.metrics = newMetrics(reg)
	}
	return r
}

// Write stamps rec with the Recorder's source and writes it: for records a surface builds
// itself (a ToolApproval's outcome). A nil Recorder writes nothing.
func (r *Recorder) Write(rec Record) {
	if r == nil {
		return
	}
	r.stamp(&rec)
	r.out.Write(rec)
	for _, s := range r.sinks {
		s.Emit(rec)
	}
}

func (r *Recorder) stamp(rec *Record) {
	rec.ReportedBy = r.source.ReportedBy
	rec.Namespace, rec.Confirmer = r.source.Namespace, r.source.Confirmer
	if rec.Policy == "" {
		rec.Policy = r.source.Policy
	}
}

// Origin is what a surface knows of a call beyond its gate.Call; each field set is written on
// the record.
type Origin struct {
	// ToolUseID is the Managed Agents tool-use id the confirmer answers.
	ToolUseID string
	// Caller is who called the gate API: the ServiceAccount TokenReview authenticated, or
	// "insecure-no-auth".
	Caller string
}

// Gate decides calls: a *gate.Gate, or a Refusal.
type Gate interface {
	Decide(*gate.Call) gate.Decision
}

// Refusal is a Gate that refuses every call with one decision, made without consulting the
// rules (a call the surface cannot hand to the gate).
type Refusal gate.Decision

// Decide is the refusal.
func (r Refusal) Decide(*gate.Call) gate.Decision { return gate.Decision(r) }

// EvaluateRaw renders c's input from its JSON encoding (gate.RenderRawInput) and decides it
// with g. Input that does not decode is refused with input_invalid without consulting g, and
// recorded like any other decision.
func (r *Recorder) EvaluateRaw(g Gate, c *gate.Call, rawInput []byte, o Origin) gate.Decision {
	input, err := gate.RenderRawInput(rawInput)
	if err != nil {
		return r.Evaluate(Refusal(gate.Refuse(gate.CodeInputInvalid, err.Error())), c, rawInput, o)
	}
	c.Input = input
	return r.Evaluate(g, c, rawInput, o)
}

// Evaluate decides c with g and records the decision: the one place a decision of the confirmer
// binary is timed, counted and written. rawInput is the input as it arrived: hashed and
// measured, never written. A decision that let an Ask or Block through (Audit) has enforcement
// "audit" on its record and mode "audit" in its count, and its record says what would have been
// enforced (would).
func (r *Recorder) Evaluate(g Gate, c *gate.Call, rawInput []byte, o Origin) gate.Decision {
	if r == nil {
		return g.Decide(c)
	}
	start := time.Now()
	d := g.Decide(c)
	took := time.Since(start)
	if m := r.metrics; m != nil {
		m.latency.WithLabelValues(c.Surface).Observe(took.Seconds())
		m.decisions.WithLabelValues(c.Surface, string(d.Verdict), EnforcementOf(d)).Inc()
		if d.Would != nil {
			m.audited.WithLabelValues(c.Surface, string(d.Would.Verdict)).Inc()
		}
	}
	rec := FromDecision(d, c, rawInput)
	rec.LatencyUS, rec.ToolUseID, rec.Caller = took.Microseconds(), o.ToolUseID, o.Caller
	r.Write(rec)
	return d
}
