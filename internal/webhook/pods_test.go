package webhook

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/testutil"
)

// examplePod reads a pod of docs/examples into namespace ns.
func examplePod(t *testing.T, name, ns string) *corev1.Pod {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(b, pod); err != nil {
		t.Fatal(err)
	}
	pod.Namespace = ns
	return pod
}

// governedNamespace makes a namespace holding the sample policy.
func governedNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ctx := testutil.Context(t, time.Minute)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, prefix)
	p := samplePolicy(t)
	p.Namespace = ns
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestLabelledPodIsTheExample: the pod of docs/examples/sandbox-pod-labelled.yaml (the label and
// nothing else of the gate's) is created exactly as docs/examples/sandbox-pod.yaml, which writes
// the same pod governed by hand; that one is created unchanged but for its
// wait-for-egress-policy, whose canary Service name the webhook replaces with the Service's
// ClusterIP.
func TestLabelledPodIsTheExample(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := governedNamespace(t, "inject-")

	labelled := examplePod(t, "sandbox-pod-labelled.yaml", ns)
	byHand := examplePod(t, "sandbox-pod.yaml", ns)
	byHand.Name = "by-hand"
	want := byHand.Spec.DeepCopy()
	want.InitContainers[1].Command = []string{"/egress-wait", "--control", net.JoinHostPort(canaryIP, "9444"), "--denied", net.JoinHostPort(canaryIP, "9445"), "--timeout", "60s"}
	for _, p := range []*corev1.Pod{labelled, byHand} {
		warnings.Take()
		if err := k8sClient.Create(ctx, p); err != nil {
			t.Fatalf("creating %s: %v", p.Name, err)
		}
		if w := warnings.Take(); len(w) > 0 {
			t.Errorf("creating %s drew warnings %q", p.Name, w)
		}
	}
	if !equality.Semantic.DeepEqual(labelled.Spec, byHand.Spec) {
		t.Errorf("the labelled pod is not created as sandbox-pod.yaml:\ninjected:\n%s\nby hand:\n%s", toYAML(t, labelled.Spec), toYAML(t, byHand.Spec))
	}
	// The gate's parts are exactly the example's (the API server's defaults aside).
	got := labelled.Spec.InitContainers
	names := []string{InstallContainerName, EgressWaitContainerName, GateAgentContainerName}
	if len(got) != len(names) || len(want.InitContainers) != len(names) {
		t.Fatalf("init containers %s, want the example's %s", toYAML(t, got), toYAML(t, want.InitContainers))
	}
	for i, name := range names {
		if got[i].Name != name || got[i].Image != want.InitContainers[i].Image || !slices.Equal(got[i].Command, want.InitContainers[i].Command) ||
			!equality.Semantic.DeepEqual(got[i].VolumeMounts, want.InitContainers[i].VolumeMounts) ||
			!equality.Semantic.DeepEqual(got[i].SecurityContext, want.InitContainers[i].SecurityContext) ||
			!equality.Semantic.DeepEqual(got[i].StartupProbe, want.InitContainers[i].StartupProbe) ||
			!equality.Semantic.DeepEqual(got[i].Resources, want.InitContainers[i].Resources) {
			t.Errorf("init container %d %s, want the example's %s", i, toYAML(t, got[i]), toYAML(t, want.InitContainers[i]))
		}
	}
	if got := labelled.Spec.Containers[0].VolumeMounts; !equality.Semantic.DeepEqual(got, want.Containers[0].VolumeMounts) {
		t.Errorf("agent mounts %s, want %s", toYAML(t, got), toYAML(t, want.Containers[0].VolumeMounts))
	}
}

// TestUnlabelledPodUntouched: a pod without the label never reaches the webhook.
func TestUnlabelledPodUntouched(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := governedNamespace(t, "unlabelled-")
	pod := examplePod(t, "sandbox-pod-labelled.yaml", ns)
	delete(pod.Labels, gatev1.LabelPolicy)
	pod.Labels["app"] = "other"
	sent := pod.Spec.DeepCopy()
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.InitContainers) != 0 || len(pod.Spec.Volumes) != 0 || len(pod.Spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("an unlabelled pod was changed: sent\n%s\ngot\n%s", toYAML(t, sent), toYAML(t, pod.Spec))
	}
}

// TestPodNamingAMissingPolicyRefused: a pod whose label names no policy in its namespace is
// refused, saying which; so is one whose label is not a name.
func TestPodNamingAMissingPolicyRefused(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := governedNamespace(t, "missing-")
	pod := examplePod(t, "sandbox-pod-labelled.yaml", ns)
	pod.Labels[gatev1.LabelPolicy] = "codign-agents"
	err := k8sClient.Create(ctx, pod)
	if err == nil {
		t.Fatal("a pod naming a missing policy was created")
	}
	if want := `names HarnessAgentPolicy "codign-agents", which does not exist in namespace ` + ns; !strings.Contains(err.Error(), want) {
		t.Errorf("refusal %q does not say %q", err, want)
	}
	pod.Labels[gatev1.LabelPolicy] = ""
	if err := k8sClient.Create(ctx, pod); err == nil || !strings.Contains(err.Error(), "names no HarnessAgentPolicy") {
		t.Errorf("a pod labelled with an empty policy name: %v", err)
	}
}

// TestPodInjectionLeavesWhatItDidNotAdd: the pod's own init containers get nothing, containers
// listed in the skip annotation get nothing, and the gate's init containers run first.
func TestPodInjectionLeavesWhatItDidNotAdd(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := governedNamespace(t, "skip-")
	pod := examplePod(t, "sandbox-pod-labelled.yaml", ns)
	pod.Annotations = map[string]string{AnnotationSkipContainers: "proxy, nothing-by-that-name"}
	restricted := *pod.Spec.Containers[0].SecurityContext
	pod.Spec.InitContainers = []corev1.Container{{Name: "clone", Image: "registry.example/git:1", SecurityContext: &restricted}}
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "proxy", Image: "registry.example/proxy:1", SecurityContext: &restricted})
	warnings.Take()
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	names := func(cs []corev1.Container) (out []string) {
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	if got := names(pod.Spec.InitContainers); !slices.Equal(got, []string{InstallContainerName, EgressWaitContainerName, GateAgentContainerName, "clone"}) {
		t.Errorf("init containers %v, want install-gate-hook, the egress wait and gate-agent before the pod's own", got)
	}
	if m := pod.Spec.InitContainers[3].VolumeMounts; len(m) != 0 {
		t.Errorf("the pod's own init container got mounts %v", m)
	}
	if m := pod.Spec.Containers[1].VolumeMounts; len(m) != 0 {
		t.Errorf("the skipped container got mounts %v", m)
	}
	if m := pod.Spec.Containers[0].VolumeMounts; len(m) != len(governedMounts(InjectOptions{})) {
		t.Errorf("the agent got mounts %v, want the gate's %d", m, len(governedMounts(InjectOptions{})))
	}
	if w := warnings.Take(); len(w) != 1 || !strings.Contains(w[0], `"nothing-by-that-name", which is not a container or native sidecar of this pod`) {
		t.Errorf("warnings %q, want one about the unknown name in the annotation", w)
	}
}

// TestPodConflictsRefused: a pod that mounts something else where the gate mounts its bundle,
// or whose gate volume is another policy's, is refused rather than governed in part.
func TestPodConflictsRefused(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := governedNamespace(t, "conflict-")

	pod := examplePod(t, "sandbox-pod-labelled.yaml", ns)
	pod.Spec.Volumes = []corev1.Volume{{Name: "settings", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "settings", MountPath: "/etc/claude-code/managed-settings.json", SubPath: "x"}}
	err := k8sClient.Create(ctx, pod)
	if err == nil || !strings.Contains(err.Error(), "container agent mounts volume settings (a sub-path of it) at /etc/claude-code/managed-settings.json, inside /etc/claude-code") {
		t.Errorf("a mount over the managed settings: %v", err)
	}

	// A writable volume at Gemini CLI's settings directory would make that directory mode 0777,
	// and Gemini CLI would ignore the settings in it.
	pod = examplePod(t, "sandbox-pod-labelled.yaml", ns)
	pod.Spec.Volumes = []corev1.Volume{{Name: "defaults", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "mine"}}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "defaults", MountPath: "/etc/gemini-cli/system-defaults.json", SubPath: "system-defaults.json"}}
	err = k8sClient.Create(ctx, pod)
	if err == nil || !strings.Contains(err.Error(), "container agent mounts volume defaults (a sub-path of it) at /etc/gemini-cli/system-defaults.json, beside /etc/gemini-cli/settings.json") {
		t.Errorf("a file beside Gemini CLI's system settings: %v", err)
	}
	for _, dir := range []string{"/etc/gemini-cli", "/etc"} {
		pod = examplePod(t, "sandbox-pod-labelled.yaml", ns)
		pod.Spec.Volumes = []corev1.Volume{{Name: "etc", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "etc", MountPath: dir}}
		err = k8sClient.Create(ctx, pod)
		if err == nil || !strings.Contains(err.Error(), "container agent mounts volume etc at "+dir+", a directory above /etc/gemini-cli/settings.json") {
			t.Errorf("a volume at %s: %v", dir, err)
		}
	}

	pod = examplePod(t, "sandbox-pod.yaml", ns)
	hooks := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == VolumeHooks })
	pod.Spec.Volumes[hooks].Projected.Sources[0].ConfigMap.Name = "other-policy-bootstrap"
	err = k8sClient.Create(ctx, pod)
	if err == nil || !strings.Contains(err.Error(), "volume gate-hooks must be exactly what the injection renders from ConfigMap coding-agents-bootstrap") {
		t.Errorf("another policy's bundle under the gate's volume name: %v", err)
	}
}

// TestSecondPassIsNoOp: the webhook run again on the pod it injected (reinvocationPolicy
// IfNeeded), or on the example written by hand, answers with no patch. Each pass stamps the
// render digest (AnnotationInjection), which a second pass finds there.
func TestSecondPassIsNoOp(t *testing.T) {
	p := samplePolicy(t)
	h := &PodInjector{
		Reader:  fake.NewClientBuilder().WithScheme(scheme).WithObjects(p, canaryService(DefaultEgressCanary, "10.96.0.44")).Build(),
		Options: InjectOptions{GateHookImage: testGateHookImage},
	}
	first := h.Handle(t.Context(), createRequest(t, examplePod(t, "sandbox-pod-labelled.yaml", p.Namespace)))
	if !first.Allowed || len(first.Patches) == 0 {
		t.Fatalf("first pass: allowed %v, %d patches", first.Allowed, len(first.Patches))
	}
	o := h.Options
	o.EgressCanary.Host = "10.96.0.44"
	injected := examplePod(t, "sandbox-pod-labelled.yaml", p.Namespace)
	if _, err := Inject(injected, p.Name, o); err != nil {
		t.Fatal(err)
	}
	setAnnotation(injected, gatev1.AnnotationInjection, RenderDigest(o))
	// The example written by hand is patched once, in its wait-for-egress-policy's command alone
	// (the Service's name to its ClusterIP), and stamped; the pod so patched is then left as it is.
	byHand := examplePod(t, "sandbox-pod.yaml", p.Namespace)
	resp := h.Handle(t.Context(), createRequest(t, byHand))
	want := []string{"add /metadata/annotations", "replace /spec/initContainers/1/command/2", "replace /spec/initContainers/1/command/4"}
	if !resp.Allowed || !slices.Equal(patchPaths(resp.Patches), want) {
		t.Errorf("sandbox-pod.yaml: allowed %v, patches %v, want %v", resp.Allowed, patchPaths(resp.Patches), want)
	}
	if _, err := Inject(byHand, p.Name, o); err != nil {
		t.Fatal(err)
	}
	setAnnotation(byHand, gatev1.AnnotationInjection, RenderDigest(o))
	for name, pod := range map[string]*corev1.Pod{"injected": injected, "sandbox-pod.yaml injected": byHand} {
		resp := h.Handle(t.Context(), createRequest(t, pod))
		if !resp.Allowed || len(resp.Patches) != 0 || len(resp.Patch) != 0 {
			t.Errorf("%s: allowed %v, patches %v", name, resp.Allowed, resp.Patches)
		}
	}
}

func createRequest(t *testing.T, pod *corev1.Pod) admission.Request {
	t.Helper()
	b, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: pod.Namespace, Object: runtime.RawExtension{Raw: b},
	}}
}

// TestInjectHonoursTheManagerPaths: --bootstrap-mount-dir and --gate-hook-path move the mounts
// and the install directory together.
func TestInjectHonoursTheManagerPaths(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{gatev1.LabelPolicy: "p"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent"}}}}
	o := InjectOptions{GateHookImage: "img"}
	o.Bootstrap.MountDir, o.Bootstrap.HookBin = "/gate/hooks", "/gate/bin/gate-hook"
	if _, err := Inject(pod, "p", o); err != nil {
		t.Fatal(err)
	}
	if c := pod.Spec.InitContainers[0]; !slices.Equal(c.Command, []string{"/gate-hook", "--install", "/gate/bin"}) || c.VolumeMounts[0].MountPath != "/gate/bin" {
		t.Errorf("install container %+v", c)
	}
	var paths []string
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		paths = append(paths, m.MountPath)
	}
	if !slices.Equal(paths, []string{"/gate/bin", "/gate/hooks", ManagedSettingsDir, CodexDir, GeminiDir + "/settings.json", "/run/gate-agent", "/run/gate-fallback"}) {
		t.Errorf("mounts at %v", paths)
	}
	if c := pod.Spec.InitContainers[2]; c.Name != GateAgentContainerName || !slices.Contains(c.Command, "/gate/hooks") || c.VolumeMounts[0].MountPath != "/gate/hooks" {
		t.Errorf("gate-agent %+v reads no bundle at /gate/hooks", c)
	}
}

func toYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestRenderDigest: the digest changes with what the injection renders (the hook image, the
// mount directory) and not with what differs per admission (the canary's resolved address, a
// policy's gate-agent resources).
func TestRenderDigest(t *testing.T) {
	base := InjectOptions{GateHookImage: testGateHookImage}
	d := RenderDigest(base)
	if !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+32 {
		t.Fatalf("digest %q", d)
	}
	same := base
	same.EgressCanary.Host = "10.96.0.44"
	same.GateAgentResources = &corev1.ResourceRequirements{}
	if RenderDigest(same) != d {
		t.Error("the canary's address or the gate-agent's resources change the digest")
	}
	for name, o := range map[string]InjectOptions{
		"another image":           {GateHookImage: testGateHookImage + "-2"},
		"another mount directory": {GateHookImage: testGateHookImage, Bootstrap: bootstrap.Options{MountDir: "/opt/other"}},
	} {
		if RenderDigest(o) == d {
			t.Errorf("%s renders the same digest", name)
		}
	}
}
