package controllers

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/egress"
)

// TestDenyAllAllowsTheEgressCanary: a deny-all policy's NetworkPolicy allows the manager's
// egress canary control port and nothing else, and its status still says DenyAll, so
// egress-wait can prove the policy enforced in pods that may reach nothing else.
func TestDenyAllAllowsTheEgressCanary(t *testing.T) {
	c := egress.Canary{Namespace: "gate-system", Labels: map[string]string{"app.kubernetes.io/component": "manager"}, Port: 9444}
	r := &HarnessAgentPolicyReconciler{Canary: c}
	p := newPolicy("agents", "canary")
	p.UID, p.Generation = "uid-canary", 1
	want, err := r.compute(p, &observedState{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want.egress.Spec)
	if err != nil {
		t.Fatal(err)
	}
	var spec networkingv1.NetworkPolicySpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, &spec); err != nil {
		t.Fatal(err)
	}
	if len(spec.Egress) != 1 || !c.IsRule(spec.Egress[0]) {
		t.Fatalf("deny-all egress rules %+v, want only the canary control rule", spec.Egress)
	}
	if want.egress.Mode != gatev1.EgressModeDenyAll || egress.ModeOf(spec.Egress, c) != gatev1.EgressModeDenyAll {
		t.Fatalf("mode %s / %s, want DenyAll", want.egress.Mode, egress.ModeOf(spec.Egress, c))
	}
}
