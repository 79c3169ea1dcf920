package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/testutil"
)

func TestReadyValue(t *testing.T) {
	obj := &metav1.ObjectMeta{Generation: 3}
	ready := func(s metav1.ConditionStatus, gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: gatev1.ConditionRulesCompiled, Status: metav1.ConditionTrue, ObservedGeneration: 3},
			{Type: gatev1.ConditionReady, Status: s, ObservedGeneration: gen}}
	}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  float64
	}{
		{"Ready for the current generation", ready(metav1.ConditionTrue, 3), 1},
		{"not Ready", ready(metav1.ConditionFalse, 3), 0},
		{"Unknown", ready(metav1.ConditionUnknown, 3), 0},
		{"Ready for an older generation", ready(metav1.ConditionTrue, 2), 0},
		{"not reconciled yet", nil, 0},
	} {
		if got := readyValue(obj, tc.conds); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// statusSeries reads the series of one metric in reg, keyed by their labels joined with "/".
func statusSeries(t *testing.T, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			out[labelValues(m)] = m.GetGauge().GetValue()
		}
	}
	return out
}

func labelValues(m *dto.Metric) string {
	var key string
	for i, l := range m.GetLabel() {
		if i > 0 {
			key += "/"
		}
		key += l.GetName() + "=" + l.GetValue()
	}
	return key
}

// TestStatusMetrics: the metrics have one series per policy and layer, 1 while Ready, and the
// replicas of each SessionConfirmer; a deleted policy's series goes with it; they are served
// until the manager stops. (The suite's reconcilers write the status; the metrics read it here
// through a direct client, in the manager through its cache.)
func TestStatusMetrics(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	reg := prometheus.NewRegistry()
	m := &StatusMetrics{Reader: k8sClient, ClusterPolicies: true, Registerer: reg}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Start(runCtx) }()
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "status-metrics-")
	good, broken := newPolicy(ns, "good"), newPolicy(ns, "broken")
	broken.Spec.Rules[0].When = `input.command.matches(`
	layer := newClusterPolicy(ns+"-layer", ns, gatev1.Rule{Name: "no-curl", Tools: []string{"Bash"}, When: `input.command.startsWith("curl")`, Action: gatev1.ActionBlock, Reason: "no curl"})
	sc := newConfirmerObj(ns)
	sc.Spec.Replicas = ptr.To[int32](3)
	for _, err := range []error{k8sClient.Create(ctx, good), k8sClient.Create(ctx, broken), k8sClient.Create(ctx, layer), k8sClient.Create(ctx, sc)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, layer) })
	waitCondition(t, good, gatev1.ConditionReady, metav1.ConditionTrue, "")
	waitCondition(t, broken, gatev1.ConditionReady, metav1.ConditionFalse, "")

	want := map[string]map[string]float64{
		"gate_operator_policy_ready": {
			"kind=HarnessAgentPolicy/policy=good/policy_namespace=" + ns:                 1,
			"kind=HarnessAgentPolicy/policy=broken/policy_namespace=" + ns:               0,
			"kind=ClusterHarnessAgentPolicy/policy=" + layer.Name + "/policy_namespace=": 1,
		},
		"gate_operator_confirmer_replicas":       {"confirmer=agents/confirmer_namespace=" + ns: 3},
		"gate_operator_confirmer_ready_replicas": {"confirmer=agents/confirmer_namespace=" + ns: 0},
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		for name, series := range want {
			got := statusSeries(t, reg, name)
			for key, v := range series {
				if g, ok := got[key]; !ok || g != v {
					return fmt.Errorf("%s{%s} = %v (served: %v), want %v", name, key, g, ok, v)
				}
			}
		}
		return nil
	})

	if err := k8sClient.Delete(ctx, broken); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if _, ok := statusSeries(t, reg, "gate_operator_policy_ready")["kind=HarnessAgentPolicy/policy=broken/policy_namespace="+ns]; ok {
			return fmt.Errorf("the deleted policy still has a series")
		}
		return nil
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if reg.Unregister(m) {
		t.Error("the metrics are still registered after the manager stopped")
	}
}
