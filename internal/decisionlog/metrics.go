package decisionlog

import "github.com/prometheus/client_golang/prometheus"

// metrics of decisions. Labels are bounded: surfaces, verdicts and modes (enforce, audit).
type metrics struct {
	decisions *prometheus.CounterVec
	// audited counts the Ask and Block verdicts recorded and not enforced.
	audited *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_decisions_total", Help: "Gate decisions, by surface, verdict in effect and mode (audit: an Ask or Block was recorded and not enforced, see gate_audited_decisions_total; enforce: every other decision).",
		}, []string{"surface", "verdict", "mode"}),
		audited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_audited_decisions_total", Help: "Ask and Block verdicts recorded and not enforced (Audit), by surface and the verdict that would have been enforced.",
		}, []string{"surface", "verdict"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gate_decision_duration_seconds", Help: "Time to decide one call, by surface.",
			Buckets: []float64{1e-6, 5e-6, 2e-5, 1e-4, 5e-4, 2e-3, 1e-2, 5e-2},
		}, []string{"surface"}),
	}
	reg.MustRegister(m.decisions, m.audited, m.latency)
	return m
}
