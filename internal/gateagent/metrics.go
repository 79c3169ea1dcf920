package gateagent

import "github.com/prometheus/client_golang/prometheus"

// metrics of the sidecar. Labels are bounded: verdicts, modes and results are closed sets;
// codes, layers and rules come from the policy (or the gate's own codes), never from a call;
// fallback reasons are agentproto's codes, any other value counted as "unknown"; the digest
// in force is one series.
type metrics struct {
	decisions     *prometheus.CounterVec
	latency       prometheus.Histogram
	reloads       *prometheus.CounterVec
	inForce       *prometheus.GaugeVec
	fallbacks     *prometheus.CounterVec
	spoolRejected prometheus.Counter
	connections   *prometheus.CounterVec
	open          prometheus.Gauge
	acceptWaits   prometheus.Counter
	humanLane     *prometheus.CounterVec
}

// Connection results (gate_agent_connections_total).
const (
	connAnswered    = "answered"
	connTimedOut    = "timed_out"
	connInvalid     = "invalid"
	connWriteFailed = "write_failed"
	// connUnanswerable: the answer could not be encoded (a digest past the protocol's bound):
	// the connection is closed, and the client hands the call to gate-hook.
	connUnanswerable = "unanswerable"
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_agent_decisions_total", Help: "Calls the sidecar decided, by verdict in effect, mode (audit: an Ask or Block recorded and not enforced), code, deciding layer and rule.",
		}, []string{"verdict", "mode", "code", "layer", "rule"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gate_agent_decision_duration_seconds", Help: "Time from a request read whole to its answer written, a reload of the policy included.",
			Buckets: []float64{2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 5e-2, 0.25},
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_agent_policy_reloads_total", Help: "Loads of the policy bundle, by result: loaded, failed (every call it decides is refused with its code), unstable (the volume changed while it was read).",
		}, []string{"result"}),
		inForce: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gate_agent_policy_in_force", Help: "1 for the digest of each snapshot (or layers index) in force; no series while none loaded.",
		}, []string{"digest"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_agent_hook_fallbacks_total", Help: "Decisions gate-hook made because gate-client could not use the sidecar, as reported in the fallback spool (written by the agent's user: untrusted), by reason.",
		}, []string{"reason", "verdict"}),
		spoolRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gate_agent_fallback_lines_rejected_total", Help: "Lines of the fallback spool that were too long or malformed, and not reported.",
		}),
		connections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_agent_connections_total", Help: "Connections on the socket, by result: answered, timed_out (no whole request within the deadline, or no memory for its body in time), invalid, write_failed, unanswerable.",
		}, []string{"result"}),
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gate_agent_connections_open", Help: "Connections accepted and not yet closed.",
		}),
		acceptWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gate_agent_accept_waits_total", Help: "Times the sidecar stopped accepting because its bound of open connections was reached; further connections waited in the socket's backlog.",
		}),
		humanLane: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_agent_human_lane_total", Help: "Ask verdicts sent to the human lane, by outcome: Deferred (held, its approval pending), Allowed (approved), Denied (denied or expired), refused (the confirmer refused to hold it: denied), unavailable (the confirmer could not be asked: the Ask stands).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.decisions, m.latency, m.reloads, m.inForce, m.fallbacks, m.spoolRejected, m.connections, m.open, m.acceptWaits, m.humanLane)
	return m
}
