package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// Reconciles are counted by controller-runtime (controller_runtime_reconcile_total); this
	// counts the expensive part of some of them.
	snapshotBuilds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gate_operator_snapshot_builds_total",
		Help: "Compilations of a HarnessAgentPolicy's rules into a snapshot and bundle: one per generation of a policy, not one per reconcile (pods and other NetworkPolicies cause reconciles that reuse the last build).",
	})
	clusterLayerBuilds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gate_operator_cluster_layer_builds_total",
		Help: "Compilations of a ClusterHarnessAgentPolicy's rules into a layer: one per generation of the policy and workspace of the namespace policies it selects, not one per namespace.",
	})
	resolvedAddresses = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gate_operator_egress_resolved_addresses",
		Help: "Host addresses allowed by the egress NetworkPolicies of all HarnessAgentPolicies.",
	})
)

func init() {
	metrics.Registry.MustRegister(snapshotBuilds, clusterLayerBuilds, resolvedAddresses)
}
