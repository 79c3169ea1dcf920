package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// TestConfirmerResources: a SessionConfirmer without spec.resources still gets a container
// with requests (so it is scheduled with room) and a memory limit (so a flood of clients costs
// one pod a restart, not the node its memory); spec.resources, when given, is used as it is.
func TestConfirmerResources(t *testing.T) {
	r := &SessionConfirmerReconciler{ConfirmerImage: testConfirmerImage, MountDir: "/etc/gate/bootstrap"}
	p := &gatev1.HarnessAgentPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "coding-agents"}}
	rendered := func(sc *gatev1.SessionConfirmer) corev1.ResourceRequirements {
		t.Helper()
		d := r.desiredDeployment(sc, p)
		c := d.Spec.Template.Spec.Containers[0]
		var out corev1.ResourceRequirements
		if c.Resources != nil {
			if c.Resources.Requests != nil {
				out.Requests = *c.Resources.Requests
			}
			if c.Resources.Limits != nil {
				out.Limits = *c.Resources.Limits
			}
		}
		return out
	}

	sc := newConfirmerObj("agents")
	sc.Spec.Resources = corev1.ResourceRequirements{}
	got := rendered(sc)
	for name, want := range map[string]struct {
		q    *resource.Quantity
		want string
	}{
		"requests.cpu":    {got.Requests.Cpu(), "50m"},
		"requests.memory": {got.Requests.Memory(), "64Mi"},
		"limits.memory":   {got.Limits.Memory(), "256Mi"},
	} {
		if want.q.Cmp(resource.MustParse(want.want)) != 0 {
			t.Errorf("default %s %s, want %s", name, want.q, want.want)
		}
	}
	if _, ok := got.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("a default CPU limit throttles the gate's answers: %v", got.Limits)
	}

	given := newConfirmerObj("agents") // requests cpu 50m only
	if got := rendered(given); len(got.Limits) != 0 || len(got.Requests) != 1 || got.Requests.Cpu().String() != "50m" {
		t.Errorf("spec.resources must be used as given: %+v", got)
	}
}
