package install_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// availabilityWant is what keeps the manager's admission webhooks (failurePolicy Fail for
// governed pods) answering through a rollout, a node drain or the loss of a node.
type availabilityWant struct {
	replicas int32
	// pdb is whether a PodDisruptionBudget is rendered, with maxUnavailable.
	pdb            bool
	maxUnavailable int32
	// spread is whether the pods are spread over nodes (kubernetes.io/hostname, ScheduleAnyway).
	spread bool
}

// checkAvailability checks the Deployment's replicas, its rolling update (a new pod is ready
// before an old one goes: maxUnavailable 0, maxSurge 1, always), its spread and its
// PodDisruptionBudget, which selects exactly the Deployment's pods and lets an eviction take a
// pod that is not ready (unhealthyPodEvictionPolicy AlwaysAllow, so a broken replica never
// blocks a node drain).
func checkAvailability(t *testing.T, objs []*unstructured.Unstructured, want availabilityWant) {
	t.Helper()
	dep := deployment(t, objs)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != want.replicas {
		t.Errorf("Deployment replicas = %s, want %d", toYAML(t, dep.Spec.Replicas), want.replicas)
	}
	wantStrategy := appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxUnavailable: ptrTo(intstr.FromInt32(0)), MaxSurge: ptrTo(intstr.FromInt32(1)),
	}}
	if !equality.Semantic.DeepEqual(dep.Spec.Strategy, wantStrategy) {
		t.Errorf("Deployment strategy = %s, want a rolling update with maxUnavailable 0 and maxSurge 1", toYAML(t, dep.Spec.Strategy))
	}

	// The manager's webhook server drains for 5 s once its controllers have stopped, within the
	// manager's own 30 s shutdown timeout; kubelet must not kill it sooner.
	if g := dep.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("terminationGracePeriodSeconds = %s, want 30 (the manager's shutdown timeout)", toYAML(t, g))
	}

	spread := dep.Spec.Template.Spec.TopologySpreadConstraints
	if !want.spread {
		if len(spread) != 0 {
			t.Errorf("topologySpreadConstraints %s rendered, want none", toYAML(t, spread))
		}
	} else {
		wantSpread := []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				"app.kubernetes.io/name": "gate-operator", "app.kubernetes.io/instance": release, "app.kubernetes.io/component": "manager",
			}},
			MatchLabelKeys: []string{appsv1.DefaultDeploymentUniqueLabelKey},
		}}
		if !equality.Semantic.DeepEqual(spread, wantSpread) {
			t.Errorf("topologySpreadConstraints = %s, want %s", toYAML(t, spread), toYAML(t, wantSpread))
		}
		for k, v := range wantSpread[0].LabelSelector.MatchLabels {
			if dep.Spec.Template.Labels[k] != v {
				t.Errorf("the spread selects %s=%s, which the manager pods do not carry (%v)", k, v, dep.Spec.Template.Labels)
			}
		}
	}

	// Admissions reach ready replicas only: the webhook Service selects the manager pods and
	// leaves out those not ready (a replica is ready once it serves its certificate).
	svc := typed[corev1.Service](t, find(t, objs, "Service", "gate-operator-webhook"))
	if len(svc.Spec.Selector) == 0 || svc.Spec.PublishNotReadyAddresses || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("the webhook Service selects %v (publishNotReadyAddresses %v), want the manager pods (%v), ready ones only", svc.Spec.Selector, svc.Spec.PublishNotReadyAddresses, dep.Spec.Template.Labels)
	}

	pdbs := ofKind(objs, "PodDisruptionBudget")
	if !want.pdb {
		if len(pdbs) != 0 {
			t.Errorf("%d PodDisruptionBudgets rendered, want none", len(pdbs))
		}
		return
	}
	if len(pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets rendered, want 1", len(pdbs))
	}
	pdb := typed[policyv1.PodDisruptionBudget](t, pdbs[0])
	if pdb.Name != "gate-operator" || pdb.Namespace != namespace {
		t.Errorf("PodDisruptionBudget %s/%s, want %s/gate-operator", pdb.Namespace, pdb.Name, namespace)
	}
	wantPDB := policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable:             ptrTo(intstr.FromInt32(want.maxUnavailable)),
		Selector:                   &metav1.LabelSelector{MatchLabels: dep.Spec.Selector.MatchLabels},
		UnhealthyPodEvictionPolicy: ptrTo(policyv1.AlwaysAllow),
	}
	if !equality.Semantic.DeepEqual(pdb.Spec, wantPDB) {
		t.Errorf("PodDisruptionBudget spec = %s, want %s", toYAML(t, pdb.Spec), toYAML(t, wantPDB))
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestHelmTemplateAvailability: by default two manager replicas with leader election, a
// PodDisruptionBudget, spread over nodes and a rolling update that keeps one ready; the
// single-replica option drops the budget (it would block every drain of its node) and the
// leader election, and every part can be turned off alone.
func TestHelmTemplateAvailability(t *testing.T) {
	for _, tc := range []struct {
		name        string
		values      string
		want        availabilityWant
		leaderElect bool
	}{
		{"defaults", "", availabilityWant{replicas: 2, pdb: true, maxUnavailable: 1, spread: true}, true},
		{"one replica", "replicas: 1\n", availabilityWant{replicas: 1, spread: true}, false},
		{"three replicas of which two may go", "replicas: 3\npodDisruptionBudget:\n  maxUnavailable: 2\n", availabilityWant{replicas: 3, pdb: true, maxUnavailable: 2, spread: true}, true},
		{"no budget", "podDisruptionBudget:\n  enabled: false\n", availabilityWant{replicas: 2, spread: true}, true},
		{"no spread", "topologySpread:\n  enabled: false\n", availabilityWant{replicas: 2, pdb: true, maxUnavailable: 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := helmTemplate(t, "-f", writeValues(t, tc.values))
			checkAvailability(t, objs, tc.want)
			if got := slices.Contains(deployment(t, objs).Spec.Template.Spec.Containers[0].Args, "--leader-elect"); got != tc.leaderElect {
				t.Errorf("--leader-elect passed: %v, want %v", got, tc.leaderElect)
			}
		})
	}
	t.Run("a budget that lets every pod go", func(t *testing.T) {
		out, err := helm(t, "template", release, "charts/gate-operator", "--namespace", namespace, "--set", "podDisruptionBudget.maxUnavailable=2")
		if err == nil || !strings.Contains(out, "podDisruptionBudget.maxUnavailable must be below replicas") {
			t.Errorf("maxUnavailable 2 of 2 replicas: %v\n%s", err, head(out, 10))
		}
	})
	t.Run("spread by zone with DoNotSchedule", func(t *testing.T) {
		objs := helmTemplate(t, "-f", writeValues(t, "topologySpread:\n  topologyKey: topology.kubernetes.io/zone\n  whenUnsatisfiable: DoNotSchedule\n"))
		spread := deployment(t, objs).Spec.Template.Spec.TopologySpreadConstraints
		if len(spread) != 1 || spread[0].TopologyKey != corev1.LabelTopologyZone || spread[0].WhenUnsatisfiable != corev1.DoNotSchedule {
			t.Errorf("topologySpreadConstraints = %s, want one by zone, DoNotSchedule", toYAML(t, spread))
		}
	})
}
