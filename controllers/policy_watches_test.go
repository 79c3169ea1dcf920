package controllers

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// TestWatchesEnqueueOnlyWhatCanChange: a NetworkPolicy's event enqueues the policies it can
// shadow and a pod's the policies that select it, never every policy in the namespace.
func TestWatchesEnqueueOnlyWhatCanChange(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = gatev1.AddToScheme(scheme)
	policy := func(name, app string) *gatev1.HarnessAgentPolicy {
		return &gatev1.HarnessAgentPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: name},
			Spec:       gatev1.HarnessAgentPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "sandbox", Labels: map[string]string{"app": "a", "team": "ml"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(policy("a", "a"), policy("b", "b"), pod).Build()
	r := &HarnessAgentPolicyReconciler{Client: c}

	np := func(name string, selector map[string]string, egress bool) *networkingv1.NetworkPolicy {
		n := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: name},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: selector},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			},
		}
		if egress {
			n.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
		}
		return n
	}
	for _, tc := range []struct {
		name string
		obj  client.Object
		want []string
	}{
		{"a deny-all NetworkPolicy shadows nobody", np("other", nil, false), nil},
		{"an allowing one selecting a governed pod", np("team-ml", map[string]string{"team": "ml"}, true), []string{"a"}},
		{"an allowing one selecting no pod", np("team-x", map[string]string{"team": "x"}, true), nil},
		{"an allowing one selecting every pod", np("wide", nil, true), []string{"a", "b"}},
		{"a policy's own NetworkPolicy is left to Owns", np("a-egress", nil, true), []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := requestNames(r.policiesShadowedBy(context.Background(), tc.obj)); !slices.Equal(got, tc.want) {
				t.Errorf("enqueued %v, want %v", got, tc.want)
			}
		})
	}
	if got := requestNames(r.policiesGoverning(context.Background(), pod)); !slices.Equal(got, []string{"a"}) {
		t.Errorf("a pod of a enqueued %v", got)
	}
}

func requestNames(reqs []reconcile.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}
