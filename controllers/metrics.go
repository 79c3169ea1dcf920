package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	policyReconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gate_operator_policy_reconcile_total",
		Help: "HarnessAgentPolicy reconciles, by result (success or error).",
	}, []string{"result"})
	resolvedAddresses = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gate_operator_egress_resolved_addresses",
		Help: "Host addresses allowed by the egress NetworkPolicies of all HarnessAgentPolicies.",
	})
)

func init() {
	metrics.Registry.MustRegister(policyReconciles, resolvedAddresses)
}

func observeReconcile(err error) {
	if err != nil {
		policyReconciles.WithLabelValues("error").Inc()
		return
	}
	policyReconciles.WithLabelValues("success").Inc()
}
