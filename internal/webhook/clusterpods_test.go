package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
)

// tenantPod is an agent pod of namespace ns with these labels and nothing of the gate's.
func tenantPod(ns string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "agent", Image: "registry.example/coding-agent:1.0"},
			{Name: "proxy", Image: "registry.example/proxy:1.0"},
		}},
	}
}

func tenantNamespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func baselinePolicy(name string) *gatev1.ClusterHarnessAgentPolicy {
	return &gatev1.ClusterHarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gatev1.ClusterHarnessAgentPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "yes"}},
			PodSelector:       metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}},
		},
	}
}

// clusterInjector is the pod webhook reading these objects, with cluster policies on.
func clusterInjector(objs ...client.Object) *PodInjector {
	objs = append(objs, canaryService(DefaultEgressCanary, "10.96.0.44"))
	return &PodInjector{
		Reader:          fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build(),
		Options:         InjectOptions{GateHookImage: testGateHookImage},
		ClusterPolicies: true,
	}
}

// applyResponse is the pod as the API server would store it after resp's patches.
func applyResponse(t *testing.T, pod *corev1.Pod, resp admission.Response) *corev1.Pod {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Patches) > 0 {
		ops, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		if raw, err = patch.Apply(raw); err != nil {
			t.Fatal(err)
		}
	}
	out := &corev1.Pod{}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mountsConfigMap(pod *corev1.Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == VolumeHooks && v.Projected != nil && v.Projected.Sources[0].ConfigMap.Name == name {
			return true
		}
	}
	return false
}

// TestClusterPolicyGovernsUnlabelledPods: a pod a cluster policy selects is governed without
// the opt-in label: by the one namespace policy selecting it (and labelled for it), else by the
// namespace's baseline bundle (and labelled for the baseline's NetworkPolicy); the validating
// check admits the result and refuses the pod as it came. A pod no cluster policy selects, or
// one in a system namespace, is left alone; two namespace policies selecting it are refused.
func TestClusterPolicyGovernsUnlabelledPods(t *testing.T) {
	c := baselinePolicy("baseline")
	tenant := tenantNamespace("team-a", map[string]string{"tenant": "yes"})
	other := tenantNamespace("other", nil)
	system := tenantNamespace(metav1.NamespaceSystem, map[string]string{"tenant": "yes"})

	t.Run("baseline", func(t *testing.T) {
		h := clusterInjector(c, tenant, other, system)
		pod := tenantPod("team-a", map[string]string{"app": "agent", gatev1.LabelBaseline: "false"})
		resp := h.Handle(t.Context(), createRequest(t, pod))
		if !resp.Allowed {
			t.Fatalf("refused: %s", resp.Result.Message)
		}
		got := applyResponse(t, pod, resp)
		if !mountsConfigMap(got, bootstrap.BaselineConfigMap) || got.Labels[gatev1.LabelBaseline] != "true" {
			t.Fatalf("not governed by the baseline bundle: labels %v, volumes %v", got.Labels, got.Spec.Volumes)
		}
		v := &PodValidator{Injector: h}
		if resp := v.Handle(t.Context(), createRequest(t, got)); !resp.Allowed {
			t.Errorf("the validating check refuses the injected pod: %s", resp.Result.Message)
		}
		if resp := v.Handle(t.Context(), createRequest(t, pod)); resp.Allowed {
			t.Error("the validating check admits the selected pod as it came, ungoverned")
		}
		unlabelled := got.DeepCopy()
		delete(unlabelled.Labels, gatev1.LabelBaseline)
		if resp := v.Handle(t.Context(), createRequest(t, unlabelled)); resp.Allowed || !strings.Contains(resp.Result.Message, gatev1.LabelBaseline) {
			t.Errorf("the validating check admits a baseline pod without %s: %v", gatev1.LabelBaseline, resp.Result)
		}
		// Run again on its own result, the injection changes nothing.
		if again := h.Handle(t.Context(), createRequest(t, got)); !again.Allowed || len(again.Patches) != 0 {
			t.Errorf("second pass: allowed %v, patches %v", again.Allowed, again.Patches)
		}
	})

	t.Run("namespace policy selects it", func(t *testing.T) {
		p := samplePolicy(t)
		p.Namespace = "team-a"
		p.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}
		h := clusterInjector(c, tenant, p)
		pod := tenantPod("team-a", map[string]string{"app": "agent", gatev1.LabelBaseline: "true"})
		resp := h.Handle(t.Context(), createRequest(t, pod))
		got := applyResponse(t, pod, resp)
		if !resp.Allowed || got.Labels[gatev1.LabelPolicy] != p.Name || !mountsConfigMap(got, bootstrap.ConfigMapName(p.Name)) {
			t.Fatalf("not governed by %s: allowed %v (%v), labels %v", p.Name, resp.Allowed, resp.Result, got.Labels)
		}
		if _, ok := got.Labels[gatev1.LabelBaseline]; ok {
			t.Error("a pod a namespace policy governs keeps the baseline label, so the baseline's NetworkPolicy would widen its egress")
		}
		if resp := (&PodValidator{Injector: h}).Handle(t.Context(), createRequest(t, got)); !resp.Allowed {
			t.Errorf("the validating check refuses the injected pod: %s", resp.Result.Message)
		}

		second := p.DeepCopy()
		second.Name = "second"
		h = clusterInjector(c, tenant, p, second)
		resp = h.Handle(t.Context(), createRequest(t, tenantPod("team-a", map[string]string{"app": "agent"})))
		if resp.Allowed || !strings.Contains(resp.Result.Message, "coding-agents, second") {
			t.Errorf("two namespace policies select the pod: allowed %v, %v", resp.Allowed, resp.Result)
		}
	})

	for name, pod := range map[string]*corev1.Pod{
		"namespace not selected":   tenantPod("other", map[string]string{"app": "agent"}),
		"pod not selected":         tenantPod("team-a", map[string]string{"role": "db"}),
		"system namespace":         tenantPod(metav1.NamespaceSystem, map[string]string{"app": "agent"}),
		"cluster policies are off": tenantPod("team-a", map[string]string{"app": "agent"}),
	} {
		t.Run(name, func(t *testing.T) {
			h := clusterInjector(c, tenant, other, system)
			h.ClusterPolicies = name != "cluster policies are off"
			resp := h.Handle(t.Context(), createRequest(t, pod))
			if !resp.Allowed || len(resp.Patches) != 0 {
				t.Errorf("allowed %v, patches %v; want it left alone", resp.Allowed, resp.Patches)
			}
		})
	}
}

// TestSkipAnnotationUnderClusterPolicies: a container a cluster policy governs is left out of
// the injection only when every cluster policy selecting the pod lists it, labelled pod or not.
func TestSkipAnnotationUnderClusterPolicies(t *testing.T) {
	c := baselinePolicy("baseline")
	tenant := tenantNamespace("team-a", map[string]string{"tenant": "yes"})
	pod := tenantPod("team-a", map[string]string{"app": "agent"})
	pod.Annotations = map[string]string{AnnotationSkipContainers: "proxy"}

	resp := clusterInjector(c, tenant).Handle(t.Context(), createRequest(t, pod))
	if resp.Allowed || !strings.Contains(resp.Result.Message, `"proxy"`) || !strings.Contains(resp.Result.Message, "spec.skipContainers") {
		t.Errorf("skipping a container the baseline does not list: allowed %v, %v", resp.Allowed, resp.Result)
	}
	p := samplePolicy(t)
	p.Namespace = "team-a"
	labelled := pod.DeepCopy()
	labelled.Labels[gatev1.LabelPolicy] = p.Name
	if resp := clusterInjector(c, tenant, p).Handle(t.Context(), createRequest(t, labelled)); resp.Allowed {
		t.Error("a labelled pod skips a container the baseline governs and does not list")
	}

	listed := c.DeepCopy()
	listed.Spec.SkipContainers = []string{"proxy"}
	resp = clusterInjector(listed, tenant).Handle(t.Context(), createRequest(t, pod))
	got := applyResponse(t, pod, resp)
	if !resp.Allowed || len(got.Spec.Containers[1].VolumeMounts) != 0 || len(got.Spec.Containers[0].VolumeMounts) == 0 {
		t.Errorf("skipping a container the baseline lists: allowed %v (%v), mounts agent %v proxy %v", resp.Allowed, resp.Result, got.Spec.Containers[0].VolumeMounts, got.Spec.Containers[1].VolumeMounts)
	}
}
