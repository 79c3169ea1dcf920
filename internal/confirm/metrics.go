package confirm

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the confirmer: confirmations, Sessions API errors, streams, reloads and approvals
// (a decision's own metrics are internal/decisionlog's). Labels are bounded: results, HTTP
// status codes, and the one digest in force.
type Metrics struct {
	Confirmations   *prometheus.CounterVec
	APIErrors       *prometheus.CounterVec
	Reconnects      prometheus.Counter
	PendingHuman    prometheus.Gauge
	SnapshotReloads *prometheus.CounterVec
	// SnapshotInForce is 1 for the digest of the snapshot in force, its one series (none until
	// one is loaded). The metrics listener carries it; the gate API's /readyz does not.
	SnapshotInForce *prometheus.GaugeVec
	// Streamed is the sessions this replica streams now; Members the replicas sharing the
	// sessions, as this one sees them (0 when it does not share them).
	Streamed prometheus.Gauge
	Members  prometheus.Gauge
	// Approvals counts the ToolApprovals written, by result; ApprovalLatency is the time from a
	// human's answer (status.decision.time) to its confirmation reaching the session.
	Approvals       *prometheus.CounterVec
	ApprovalLatency prometheus.Histogram
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Confirmations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "confirmer_confirmations_total", Help: "Tool confirmations sent to Managed Agents sessions, by result (allow, deny, already_answered, error).",
		}, []string{"result"}),
		APIErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "confirmer_api_errors_total", Help: "Errors from the Sessions API, by HTTP status (0 for stream and connection errors).",
		}, []string{"status"}),
		Reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "confirmer_stream_reconnects_total", Help: "Session stream reconnects.",
		}),
		PendingHuman: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "confirmer_pending_human_approvals", Help: "Ask verdicts waiting for a human, as of the last pass over each session.",
		}),
		SnapshotReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "confirmer_snapshot_reloads_total", Help: "Snapshot reloads, by result (loaded, rejected).",
		}, []string{"result"}),
		SnapshotInForce: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "confirmer_snapshot_in_force", Help: "1 for the digest of the policy snapshot in force (one series).",
		}, []string{"digest"}),
		Streamed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "confirmer_sessions_streamed", Help: "Sessions this replica streams now.",
		}),
		Members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "confirmer_members", Help: "Live replicas sharing the sessions (--members-lease), as this replica sees them, itself included once it has joined; 0 without --members-lease.",
		}),
		Approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "confirmer_tool_approvals_total", Help: "ToolApprovals written by the confirmer, by result (created, expired, answeredinruntime, error).",
		}, []string{"result"}),
		ApprovalLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "confirmer_approval_to_confirmation_seconds", Help: "Time from a human's answer on a ToolApproval (its decision time) to the confirmation sent to the session.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}),
	}
	reg.MustRegister(m.Confirmations, m.APIErrors, m.Reconnects, m.PendingHuman, m.SnapshotReloads,
		m.SnapshotInForce, m.Streamed, m.Members, m.Approvals, m.ApprovalLatency)
	return m
}
