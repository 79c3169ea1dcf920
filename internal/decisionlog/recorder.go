// Package decisionlog keeps the record of every decision the confirmer binary makes: the
// Recorder runs the gate for one call, times and counts the decision in Prometheus metrics,
// writes it as one "decision" log line and hands the Record to each Sink. The Managed Agents
// confirmer (internal/confirm) and the gate HTTP API (internal/gateapi) hold the one Recorder
// that cmd/confirmer builds, each under its own logger name.
//
// A record never holds the tool input, only its size and SHA-256: the reason comes from the
// rule (or the gate's own refusal), not from the input.
//
// gate-hook keeps no record: it runs once per tool call as the agent's own user, so anything it
// wrote the agent could rewrite. The in-pod records come from the gate-agent sidecar
// (internal/gateagent), out of the agent's reach, as JSON lines on its stdout; it also reports
// the decisions gate-hook made while it could not answer (docs/gate-agent.md). Its record is
// its own type for now: this Recorder's records carry no time, pod or latency, and the
// decision-trail issue (28) is to settle one schema for both.
package decisionlog

import (
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/intutic/gate-operator/internal/gate"
)

// Sink receives every record, after its line is written. It is called on the goroutine that
// decided the call, so it must not block.
type Sink interface {
	Emit(Record)
}

// Recorder builds, counts and emits the record of each decision. A nil Recorder runs the gate
// and records nothing.
type Recorder struct {
	*shared
	log logr.Logger
}

// shared is what the Recorders Named from one New have in common.
type shared struct {
	metrics *metrics // nil: not counted
	sinks   []Sink
}

// New is a Recorder writing its lines to log, counting in metrics registered with reg (nil:
// no metrics), and handing every record to sinks.
func New(log logr.Logger, reg prometheus.Registerer, sinks ...Sink) *Recorder {
	s := &shared{sinks: sinks}
	if reg != nil {
		s.metrics = newMetrics(reg)
	}
	return &Recorder{shared: s, log: log}
}

// Named is the same Recorder (metrics, sinks) writing its lines under log.WithName(name).
func (r *Recorder) Named(name string) *Recorder {
	if r == nil {
		return nil
	}
	return &Recorder{shared: r.shared, log: r.log.WithName(name)}
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

// Evaluate decides c with g and records the decision: the one place a decision is timed,
// counted, written as a line and emitted. rawInput is the input as it arrived: hashed and
// measured, never logged. A decision that let an Ask or Block through (Audit) has mode "audit"
// on its line and in its count, and its line carries the would-be verdict, rule, code and reason.
func (r *Recorder) Evaluate(g Gate, c *gate.Call, rawInput []byte, o Origin) gate.Decision {
	if r == nil {
		return g.Decide(c)
	}
	start := time.Now()
	d := g.Decide(c)
	if m := r.metrics; m != nil {
		m.latency.WithLabelValues(c.Surface).Observe(time.Since(start).Seconds())
		m.decisions.WithLabelValues(c.Surface, string(d.Verdict), modeLabel(d)).Inc()
		if d.Would != nil {
			m.audited.WithLabelValues(c.Surface, string(d.Would.Verdict)).Inc()
		}
	}
	rec := recordOf(d, c, rawInput, o)
	r.log.Info("decision", rec.keysAndValues()...)
	for _, s := range r.sinks {
		s.Emit(rec)
	}
	return d
}
