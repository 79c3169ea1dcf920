package webhook

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/testutil"
)

// testInjectOptions are the options the suite's webhook renders with, the canary's address
// resolved.
func testInjectOptions() InjectOptions {
	return InjectOptions{GateHookImage: testGateHookImage, EgressCanary: EgressCanary{Host: "10.96.0.44"}}
}

// injectedExample is docs/examples/sandbox-pod-labelled.yaml as the injection renders it.
func injectedExample(t *testing.T) *corev1.Pod {
	t.Helper()
	pod := examplePod(t, "sandbox-pod-labelled.yaml", "agents")
	if _, err := Inject(pod, "coding-agents", testInjectOptions()); err != nil {
		t.Fatal(err)
	}
	return pod
}

func initContainer(pod *corev1.Pod, name string) *corev1.Container {
	i := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		return nil
	}
	return &pod.Spec.InitContainers[i]
}

func volume(pod *corev1.Pod, name string) *corev1.Volume {
	i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
	if i < 0 {
		return nil
	}
	return &pod.Spec.Volumes[i]
}

var nativeSidecar = corev1.Container{Name: "proxy", Image: "registry.example/proxy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}

// TestGovernedJudgesTheFinalSpec: a labelled pod's final spec passes only if it is what the
// injection renders. Each case is a way the issue found to run a labelled pod half governed
// (a pod written so, or changed so by a webhook after ours); the injected example and
// docs/examples/sandbox-pod.yaml with the rendered egress wait pass.
func TestGovernedJudgesTheFinalSpec(t *testing.T) {
	o := testInjectOptions()
	byHand := examplePod(t, "sandbox-pod.yaml", "agents")
	*initContainer(byHand, EgressWaitContainerName) = egressWaitContainer(o)
	for name, pod := range map[string]*corev1.Pod{"the injected example": injectedExample(t), "sandbox-pod.yaml": byHand} {
		if err := Governed(pod, "coding-agents", o); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	for _, tc := range []struct {
		name string
		edit func(pod *corev1.Pod)
		want string
	}{
		{"nothing injected (labelled by a later webhook)", func(pod *corev1.Pod) {
			*pod = *examplePod(t, "sandbox-pod-labelled.yaml", "agents")
		}, `its init containers are []`},
		{"a native sidecar without the gate's mounts", func(pod *corev1.Pod) {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, nativeSidecar)
		}, "native sidecar proxy lacks the gate's read-only mounts"},
		{"a native sidecar before the egress wait", func(pod *corev1.Pod) {
			sidecar := nativeSidecar
			sidecar.VolumeMounts = governedMounts(o)
			pod.Spec.InitContainers = slices.Insert(pod.Spec.InitContainers, 0, sidecar)
		}, "the injection runs install-gate-hook, wait-for-egress-policy and gate-agent first"},
		{"install-gate-hook writing exit 0 as the hook", func(pod *corev1.Pod) {
			c := initContainer(pod, InstallContainerName)
			c.Image, c.Command = "registry.example/busybox:1", []string{"sh", "-c", "printf 'exit 0' > /opt/intutic/bin/gate-hook"}
		}, "init container install-gate-hook is not what the injection renders"},
		{"wait-for-egress-policy running true", func(pod *corev1.Pod) {
			c := initContainer(pod, EgressWaitContainerName)
			c.Command = []string{"/bin/true"}
		}, "init container wait-for-egress-policy is not what the injection renders"},
		{"gate-bin mounted writable by the agent", func(pod *corev1.Pod) {
			pod.Spec.Containers[0].VolumeMounts[0].ReadOnly = false
		}, "container agent mounts volume gate-bin writable at /opt/intutic/bin"},
		{"gate-bin mounted writable elsewhere by another container", func(pod *corev1.Pod) {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "helper", Image: "x",
				VolumeMounts: []corev1.VolumeMount{{Name: VolumeBin, MountPath: "/elsewhere"}}})
			pod.Annotations = map[string]string{AnnotationSkipContainers: "helper"}
		}, "container helper mounts volume gate-bin writable at /elsewhere"},
		{"gate-bin not an emptyDir", func(pod *corev1.Pod) {
			volume(pod, VolumeBin).VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp"}}
		}, "volume gate-bin must be an emptyDir"},
		{"gate-hooks items that drop gate-hook.sh", func(pod *corev1.Pod) {
			volume(pod, VolumeHooks).Projected.Sources[0].ConfigMap.Items = []corev1.KeyToPath{{Key: "snapshot.json", Path: "snapshot.json"}}
		}, "volume gate-hooks must be exactly what the injection renders"},
		{"gate-hooks items that remap gate-hook.sh", func(pod *corev1.Pod) {
			volume(pod, VolumeHooks).Projected.Sources[0].ConfigMap.Items = []corev1.KeyToPath{{Key: "settings.json", Path: "gate-hook.sh"}}
		}, "volume gate-hooks must be exactly what the injection renders"},
		{"a projected defaultMode 0", func(pod *corev1.Pod) {
			volume(pod, VolumeHooks).Projected.DefaultMode = ptr.To[int32](0)
		}, "volume gate-hooks must be exactly what the injection renders"},
		{"a Secret item projected over gate-hook.sh", func(pod *corev1.Pod) {
			p := volume(pod, VolumeHooks).Projected
			p.Sources = append(p.Sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "mine"}, Items: []corev1.KeyToPath{{Key: "hook", Path: "gate-hook.sh"}}}})
		}, "volume gate-hooks must be exactly what the injection renders"},
		{"claude-managed-settings unreadable", func(pod *corev1.Pod) {
			volume(pod, VolumeManagedSettings).ConfigMap.DefaultMode = ptr.To[int32](0)
		}, "volume claude-managed-settings must be exactly what the injection renders"},
		{"claude-managed-settings optional", func(pod *corev1.Pod) {
			volume(pod, VolumeManagedSettings).ConfigMap.Optional = ptr.To(true)
		}, "volume claude-managed-settings must be exactly what the injection renders"},
		{"the agent without the managed settings", func(pod *corev1.Pod) {
			pod.Spec.Containers[0].VolumeMounts = pod.Spec.Containers[0].VolumeMounts[:2]
		}, "container agent lacks the gate's read-only mounts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := injectedExample(t)
			tc.edit(pod)
			err := Governed(pod, "coding-agents", o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Governed: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestPodValidatorRefusesWhatTheInjectionDidNotRender: the validating webhook, given a
// labelled pod's final spec, refuses one no injection rendered (as when a webhook sorted after
// ours adds the label, or the pod was created where the pod webhook does not serve) and admits
// the injected one.
func TestPodValidatorRefusesWhatTheInjectionDidNotRender(t *testing.T) {
	p := samplePolicy(t)
	p.Namespace = "agents"
	v := &PodValidator{Injector: &PodInjector{
		Reader:  fake.NewClientBuilder().WithScheme(scheme).WithObjects(p, canaryService(DefaultEgressCanary, "10.96.0.44")).Build(),
		Options: InjectOptions{GateHookImage: testGateHookImage},
	}}
	if resp := v.Handle(t.Context(), createRequest(t, injectedExample(t))); !resp.Allowed {
		t.Errorf("the injected example was refused: %v", resp.Result)
	}
	resp := v.Handle(t.Context(), createRequest(t, examplePod(t, "sandbox-pod-labelled.yaml", "agents")))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "carries label gate.intutic.io/policy=coding-agents but is not governed as the injection renders it") {
		t.Errorf("a labelled pod never injected: allowed %v, %v", resp.Allowed, resp.Result)
	}
}

// TestInjectionOwnsWhatItRenders: through the API server, a labelled pod's own install-gate-hook
// and wait-for-egress-policy are replaced by the rendered ones, first, and a native sidecar
// gets the gate's mounts and starts after the egress wait; a pod that mounts gate-bin writable
// or writes the gate's volumes otherwise is refused.
func TestInjectionOwnsWhatItRenders(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := governedNamespace(t, "owns-")
	pod := examplePod(t, "sandbox-pod.yaml", ns)
	written := pod.DeepCopy()
	install := initContainer(pod, InstallContainerName)
	install.Image, install.Command = "registry.example/busybox:1", []string{"sh", "-c", "printf 'exit 0' > /opt/intutic/bin/gate-hook"}
	initContainer(pod, EgressWaitContainerName).Command = []string{"/bin/true"}
	pod.Spec.InitContainers = append([]corev1.Container{nativeSidecar}, pod.Spec.InitContainers...)
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	names := func(cs []corev1.Container) (out []string) {
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	if got := names(pod.Spec.InitContainers); !slices.Equal(got, []string{InstallContainerName, EgressWaitContainerName, GateAgentContainerName, "proxy"}) {
		t.Errorf("init containers %v, want the gate's three first, then the pod's sidecar", got)
	}
	if c := initContainer(pod, InstallContainerName); c.Image != testGateHookImage || !slices.Equal(c.Command, initContainer(written, InstallContainerName).Command) {
		t.Errorf("install-gate-hook kept what the pod wrote: %s %q", c.Image, c.Command)
	}
	if c := initContainer(pod, EgressWaitContainerName); c.Command[0] != "/egress-wait" {
		t.Errorf("wait-for-egress-policy kept what the pod wrote: %q", c.Command)
	}
	if m := initContainer(pod, "proxy").VolumeMounts; len(m) != len(governedMounts(InjectOptions{})) {
		t.Errorf("the native sidecar got mounts %v, want the gate's %d", m, len(governedMounts(InjectOptions{})))
	}

	for _, tc := range []struct {
		name string
		edit func(pod *corev1.Pod)
		want string
	}{
		{"gate-bin writable elsewhere", func(pod *corev1.Pod) {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: "late", Image: "x",
				VolumeMounts: []corev1.VolumeMount{{Name: VolumeBin, MountPath: "/bin-rw"}}})
		}, "init container late mounts volume gate-bin writable at /bin-rw"},
		{"gate-hooks remapping gate-hook.sh", func(pod *corev1.Pod) {
			volume(pod, VolumeHooks).Projected.Sources[0].ConfigMap.Items = []corev1.KeyToPath{{Key: "settings.json", Path: "gate-hook.sh"}}
		}, "volume gate-hooks must be exactly what the injection renders"},
		{"claude-managed-settings unreadable", func(pod *corev1.Pod) {
			volume(pod, VolumeManagedSettings).ConfigMap.DefaultMode = ptr.To[int32](0)
		}, "volume claude-managed-settings must be exactly what the injection renders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := examplePod(t, "sandbox-pod.yaml", ns)
			pod.Name = "refused"
			tc.edit(pod)
			err := k8sClient.Create(ctx, pod)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("creating the pod: %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}

// TestAdmissionPoliciesRefuse: the ValidatingAdmissionPolicies of config/admission-policies,
// run by the API server itself: a governed pod cannot share its process namespace, use the
// node's, run privileged or add SYS_ADMIN or SYS_PTRACE; once created it cannot be relabelled
// (its policy label, its skip annotation, the labels its policy's podSelector reads) or take
// an ephemeral container; other updates (a finalizer, an unrelated label) go through.
func TestAdmissionPoliciesRefuse(t *testing.T) {
	admissionPoliciesEnforced(t)
	ctx := testutil.Context(t, time.Minute)
	ns := governedNamespace(t, "vap-")
	// A cluster policy's podSelector reads tier (it selects no namespace: only its keys matter).
	// Created first, so the API server holds it as a parameter by the time the pods are updated.
	tierPolicy := "vap-tier-" + strings.TrimPrefix(ns, "vap-")
	tiers := &gatev1.ClusterHarnessAgentPolicy{ObjectMeta: metav1.ObjectMeta{Name: tierPolicy}, Spec: gatev1.ClusterHarnessAgentPolicySpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"vap-test": "none"}},
		PodSelector:       metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}},
	}}
	if err := k8sClient.Create(ctx, tiers); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), tiers) })
	for _, tc := range []struct {
		name string
		edit func(pod *corev1.Pod)
		want string
	}{
		{"shareProcessNamespace", func(pod *corev1.Pod) { pod.Spec.ShareProcessNamespace = ptr.To(true) }, "may not set spec.shareProcessNamespace"},
		{"hostPID", func(pod *corev1.Pod) { pod.Spec.HostPID = true }, "may not set spec.hostPID"},
		{"hostNetwork", func(pod *corev1.Pod) { pod.Spec.HostNetwork = true }, "may not set spec.hostNetwork"},
		{"a privileged sidecar", func(pod *corev1.Pod) {
			pod.Annotations = map[string]string{AnnotationSkipContainers: "proxy"}
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "proxy", Image: "x", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}})
		}, "may not run a privileged container: proxy sets securityContext.privileged"},
		{"SYS_PTRACE", func(pod *corev1.Pod) {
			pod.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"sys_ptrace"}
		}, "may not add the capability SYS_ADMIN, SYS_PTRACE or ALL"},
		{"CAP_SYS_ADMIN in an init container", func(pod *corev1.Pod) {
			pod.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "x", SecurityContext: &corev1.SecurityContext{
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"CAP_SYS_ADMIN"}}}}}
		}, "setup adds one in securityContext.capabilities.add"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := examplePod(t, "sandbox-pod-labelled.yaml", ns)
			tc.edit(pod)
			err := k8sClient.Create(ctx, pod)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("creating the pod: %v, want a refusal saying %q", err, tc.want)
			}
		})
	}

	// The policy's podSelector reads team too.
	policy := &gatev1.HarnessAgentPolicy{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "coding-agents"}, policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a"}}}
	if err := k8sClient.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	pod := examplePod(t, "sandbox-pod-labelled.yaml", ns)
	pod.Labels["team"], pod.Labels["note"] = "a", "x"
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(pod)
	update := func(edit func(pod *corev1.Pod)) error {
		live := &corev1.Pod{}
		if err := k8sClient.Get(ctx, key, live); err != nil {
			t.Fatal(err)
		}
		edit(live)
		return k8sClient.Update(ctx, live)
	}
	for _, tc := range []struct {
		name string
		edit func(pod *corev1.Pod)
		want string // "" is admitted
	}{
		{"a finalizer", func(pod *corev1.Pod) { pod.Finalizers = append(pod.Finalizers, "batch.kubernetes.io/job-tracking") }, ""},
		{"an unrelated label", func(pod *corev1.Pod) { pod.Labels["note"] = "y" }, ""},
		{"the policy label removed", func(pod *corev1.Pod) { delete(pod.Labels, gatev1.LabelPolicy) }, "cannot change after it is created"},
		{"the policy label renamed", func(pod *corev1.Pod) { pod.Labels[gatev1.LabelPolicy] = "other" }, "cannot change after it is created"},
		{"the skip annotation added", func(pod *corev1.Pod) {
			pod.Annotations = map[string]string{AnnotationSkipContainers: "agent"}
		}, "the annotation gate.intutic.io/inject-skip-containers of a governed pod cannot change"},
		{"a label the podSelector reads", func(pod *corev1.Pod) { delete(pod.Labels, "team") },
			"the labels team of a pod governed by HarnessAgentPolicy coding-agents cannot change"},
		{"the baseline label added", func(pod *corev1.Pod) { pod.Labels[gatev1.LabelBaseline] = "true" },
			"the label gate.intutic.io/baseline of a pod cannot change after it is created"},
		{"a label a cluster policy's podSelector reads", func(pod *corev1.Pod) { pod.Labels["tier"] = "trusted" },
			"the labels tier of a governed pod cannot change after it is created: the podSelector of ClusterHarnessAgentPolicy " + tierPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := update(tc.edit)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("updating the pod: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("updating the pod: %v, want a refusal saying %q", err, tc.want)
			}
		})
	}

	t.Run("an ephemeral container", func(t *testing.T) {
		live := &corev1.Pod{}
		if err := k8sClient.Get(ctx, key, live); err != nil {
			t.Fatal(err)
		}
		live.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debugger", Image: "x", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent}}}
		err := k8sClient.SubResource("ephemeralcontainers").Update(ctx, live)
		if err == nil || !strings.Contains(err.Error(), "takes no ephemeral containers") {
			t.Errorf("adding an ephemeral container: %v, want a refusal", err)
		}
	})

	t.Run("the label added to an unlabelled pod", func(t *testing.T) {
		plain := &corev1.Pod{}
		plain.Name, plain.Namespace = "plain", ns
		plain.Spec.Containers = []corev1.Container{{Name: "c", Image: "x"}}
		if err := k8sClient.Create(ctx, plain); err != nil {
			t.Fatal(err)
		}
		patch := []byte(`{"metadata":{"labels":{"gate.intutic.io/policy":"coding-agents"}}}`)
		err := k8sClient.Patch(ctx, plain, client.RawPatch(types.MergePatchType, patch))
		if err == nil || !strings.Contains(err.Error(), "the label gate.intutic.io/policy of a pod cannot change") {
			t.Errorf("labelling a running pod: %v, want a refusal", err)
		}
	})
}
