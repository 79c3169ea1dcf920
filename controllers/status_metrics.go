package controllers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

var (
	policyReadyDesc = prometheus.NewDesc("gate_operator_policy_ready",
		"1 when the policy's Ready condition is True for its current generation, else 0 (False, Unknown, missing, or Ready for an older generation): one series per HarnessAgentPolicy and ClusterHarnessAgentPolicy (the cluster layer, policy_namespace empty), served by the leader.",
		[]string{"kind", "policy_namespace", "policy"}, nil)
	confirmerReplicasDesc = prometheus.NewDesc("gate_operator_confirmer_replicas",
		"Replicas a SessionConfirmer's Deployment is to run (spec.replicas), served by the leader.",
		[]string{"confirmer_namespace", "confirmer"}, nil)
	confirmerReadyReplicasDesc = prometheus.NewDesc("gate_operator_confirmer_ready_replicas",
		"Ready replicas of a SessionConfirmer's Deployment (status.readyReplicas), served by the leader.",
		[]string{"confirmer_namespace", "confirmer"}, nil)
)

// statusListTimeout bounds the cache reads of one scrape.
const statusListTimeout = 5 * time.Second

// StatusMetrics serves what the policies' and SessionConfirmers' status says, read from the
// manager's cache at each scrape, so a deleted object leaves no series behind and a restarted
// manager reports at once. Only the leader serves them (the one writing the status): every
// object has one series, which dashboards and alerts can count. Labels are the objects' kinds
// and names, as many as there are objects; none names a pod or a call.
type StatusMetrics struct {
	Reader client.Reader
	// ClusterPolicies reads ClusterHarnessAgentPolicies too (a manager serving every namespace).
	ClusterPolicies bool
	// Registerer is where the metrics are served while the manager leads.
	Registerer prometheus.Registerer
}

// SetupWithManager serves the metrics while mgr leads.
func (m *StatusMetrics) SetupWithManager(mgr ctrl.Manager) error { return mgr.Add(m) }

// Start registers the metrics until ctx ends; it implements manager.Runnable.
func (m *StatusMetrics) Start(ctx context.Context) error {
	if err := m.Registerer.Register(m); err != nil {
		return err
	}
	<-ctx.Done()
	m.Registerer.Unregister(m)
	return nil
}

// NeedLeaderElection is true: only the leader serves the metrics.
func (*StatusMetrics) NeedLeaderElection() bool { return true }

// Describe implements prometheus.Collector.
func (*StatusMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- policyReadyDesc
	ch <- confirmerReplicasDesc
	ch <- confirmerReadyReplicasDesc
}

// Collect implements prometheus.Collector: a list it cannot read leaves its series out, and is
// logged.
func (m *StatusMetrics) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statusListTimeout)
	defer cancel()
	log := logf.Log.WithName("status-metrics")

	var policies gatev1.HarnessAgentPolicyList
	if err := m.Reader.List(ctx, &policies, client.UnsafeDisableDeepCopy); err != nil {
		log.Error(err, "listing HarnessAgentPolicies for the metrics")
	}
	for i := range policies.Items {
		p := &policies.Items[i]
		ch <- prometheus.MustNewConstMetric(policyReadyDesc, prometheus.GaugeValue, readyValue(p, p.Status.Conditions), "HarnessAgentPolicy", p.Namespace, p.Name)
	}
	if m.ClusterPolicies {
		var layers gatev1.ClusterHarnessAgentPolicyList
		if err := m.Reader.List(ctx, &layers, client.UnsafeDisableDeepCopy); err != nil {
			log.Error(err, "listing ClusterHarnessAgentPolicies for the metrics")
		}
		for i := range layers.Items {
			c := &layers.Items[i]
			ch <- prometheus.MustNewConstMetric(policyReadyDesc, prometheus.GaugeValue, readyValue(c, c.Status.Conditions), "ClusterHarnessAgentPolicy", "", c.Name)
		}
	}
	var confirmers gatev1.SessionConfirmerList
	if err := m.Reader.List(ctx, &confirmers, client.UnsafeDisableDeepCopy); err != nil {
		log.Error(err, "listing SessionConfirmers for the metrics")
	}
	for i := range confirmers.Items {
		sc := &confirmers.Items[i]
		ch <- prometheus.MustNewConstMetric(confirmerReplicasDesc, prometheus.GaugeValue, float64(confirmerReplicas(sc)), sc.Namespace, sc.Name)
		ch <- prometheus.MustNewConstMetric(confirmerReadyReplicasDesc, prometheus.GaugeValue, float64(sc.Status.ReadyReplicas), sc.Namespace, sc.Name)
	}
}

// readyValue is 1 when obj's Ready condition is True and observed its current generation.
func readyValue(obj metav1.Object, conds []metav1.Condition) float64 {
	c := meta.FindStatusCondition(conds, gatev1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != obj.GetGeneration() {
		return 0
	}
	return 1
}
