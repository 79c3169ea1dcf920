package webhook

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// TestGateAgentIsolation: no governed container may share the gate-agent sidecar's user or
// group, write its socket's directory or take its ports; the sidecar itself is what the
// injection renders, read-only but for its socket's directory.
func TestGateAgentIsolation(t *testing.T) {
	o := InjectOptions{GateHookImage: testGateHookImage}
	for _, tc := range []struct {
		name string
		edit func(pod *corev1.Pod)
		want string
	}{
		{"the pod runs as the sidecar's user", func(pod *corev1.Pod) {
			pod.Spec.SecurityContext.RunAsUser = ptr.To(int64(GateAgentUID))
		}, "runs as user or group 65533, the gate-agent sidecar's"},
		{"a container runs as the sidecar's group", func(pod *corev1.Pod) {
			pod.Spec.Containers[0].SecurityContext.RunAsGroup = ptr.To(int64(GateAgentUID))
		}, "container agent runs as user or group 65533"},
		{"the pod's fsGroup is the sidecar's group", func(pod *corev1.Pod) {
			pod.Spec.SecurityContext.FSGroup = ptr.To(int64(GateAgentUID))
		}, "supplementalGroups or fsGroup include 65533"},
		{"the socket's directory mounted writable", func(pod *corev1.Pod) {
			pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
				corev1.VolumeMount{Name: VolumeAgentRun, MountPath: "/elsewhere"})
		}, "container agent mounts volume gate-agent-run writable at /elsewhere"},
		{"a container declares the sidecar's metrics port", func(pod *corev1.Pod) {
			pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: GateAgentMetricsPort}}
		}, "container agent declares port 18081"},
		{"the socket's volume is not an emptyDir", func(pod *corev1.Pod) {
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: VolumeAgentRun, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/run"}}})
		}, "volume gate-agent-run must be an emptyDir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := examplePod(t, "sandbox-pod-labelled.yaml", "agents")
			tc.edit(pod)
			_, err := Inject(pod, "coding-agents", o)
			if conflict := (*ConflictError)(nil); !errors.As(err, &conflict) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Inject: %v, want a conflict saying %q", err, tc.want)
			}
		})
	}

	pod := examplePod(t, "sandbox-pod-labelled.yaml", "agents")
	if _, err := Inject(pod, "coding-agents", o); err != nil {
		t.Fatal(err)
	}
	agent := initContainer(pod, GateAgentContainerName)
	if agent.RestartPolicy == nil || *agent.RestartPolicy != corev1.ContainerRestartPolicyAlways || agent.StartupProbe == nil {
		t.Errorf("gate-agent is no native sidecar with a startup probe: %+v", agent)
	}
	if sc := agent.SecurityContext; ptr.Deref(sc.RunAsUser, 0) != GateAgentUID || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || len(sc.Capabilities.Drop) != 1 {
		t.Errorf("gate-agent's security context %+v", sc)
	}
	for _, m := range agent.VolumeMounts {
		if m.ReadOnly != (m.Name != VolumeAgentRun) {
			t.Errorf("gate-agent mounts %s readOnly=%v; only its socket's directory is writable", m.Name, m.ReadOnly)
		}
	}
	if !equality.Semantic.DeepEqual(agent.Resources, DefaultGateAgentResources) {
		t.Errorf("gate-agent's resources %v, want the defaults", agent.Resources)
	}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.Name == VolumeAgentRun && !m.ReadOnly {
			t.Errorf("the agent mounts the socket's directory writable")
		}
	}
}

// TestGateAgentResourcesFromThePolicy: spec.gateAgent.resources replaces the sidecar's defaults,
// and the governed-pods check judges the pod by the same rendering.
func TestGateAgentResourcesFromThePolicy(t *testing.T) {
	p := samplePolicy(t)
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	p.Spec.GateAgent = &gatev1.GateAgentSpec{Resources: &want}
	h := &PodInjector{
		Reader:  fake.NewClientBuilder().WithScheme(scheme).WithObjects(p, canaryService(DefaultEgressCanary, "10.96.0.44")).Build(),
		Options: InjectOptions{GateHookImage: testGateHookImage},
	}
	pod := examplePod(t, "sandbox-pod-labelled.yaml", p.Namespace)
	g, refused := h.governing(t.Context(), createRequest(t, pod))
	if refused != nil {
		t.Fatalf("refused: %v", refused.Result)
	}
	if _, err := g.inject(g.pod); err != nil {
		t.Fatal(err)
	}
	if got := initContainer(g.pod, GateAgentContainerName).Resources; !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("gate-agent's resources %v, want the policy's %v", got, want)
	}
	if err := g.governed(g.pod); err != nil {
		t.Errorf("the pod so injected is not governed: %v", err)
	}
}

// TestGateAgentHumanLane: a policy's spec.gateAgent.humanApproval gives gate-agent its
// SessionConfirmer's gate API, by the Service's ClusterIP, and a projected token for that
// confirmer's audience that only gate-agent mounts; no governed container may mount it; a
// confirmer whose Service does not exist refuses the pod; the governed-pods check judges the
// pod by the same rendering.
func TestGateAgentHumanLane(t *testing.T) {
	p := samplePolicy(t)
	p.Spec.GateAgent = &gatev1.GateAgentSpec{HumanApproval: &gatev1.GateAgentHumanApproval{Confirmer: "coding-agents"}}
	confirmer := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "coding-agents-confirmer"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.80"}}
	injector := func(objs ...client.Object) *PodInjector {
		return &PodInjector{
			Reader:  fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(objs, p, canaryService(DefaultEgressCanary, "10.96.0.44"))...).Build(),
			Options: InjectOptions{GateHookImage: testGateHookImage},
		}
	}
	h := injector(confirmer)
	pod := examplePod(t, "sandbox-pod-labelled.yaml", p.Namespace)
	g, refused := h.governing(t.Context(), createRequest(t, pod))
	if refused != nil {
		t.Fatalf("refused: %v", refused.Result)
	}
	if _, err := g.inject(g.pod); err != nil {
		t.Fatal(err)
	}
	agent := initContainer(g.pod, GateAgentContainerName)
	if cmd := strings.Join(agent.Command, " "); !strings.Contains(cmd, "--confirmer-url http://10.96.0.80:8080 --confirmer-token "+ConfirmerTokenDir+"/token") {
		t.Errorf("gate-agent's command %q names no confirmer", cmd)
	}
	if !slices.ContainsFunc(agent.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == VolumeConfirmerToken && m.ReadOnly && m.MountPath == ConfirmerTokenDir
	}) {
		t.Errorf("gate-agent does not mount the token read-only: %+v", agent.VolumeMounts)
	}
	for _, c := range containersOf(g.pod) {
		if c.Name != GateAgentContainerName && slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == VolumeConfirmerToken }) {
			t.Errorf("%s mounts the confirmer token", c.Name)
		}
	}
	i := slices.IndexFunc(g.pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == VolumeConfirmerToken })
	if i < 0 || g.pod.Spec.Volumes[i].Projected == nil || g.pod.Spec.Volumes[i].Projected.Sources[0].ServiceAccountToken.Audience != "gate.intutic.io/confirmer/"+p.Namespace+"/coding-agents" {
		t.Fatalf("no projected token for the confirmer's audience: %+v", g.pod.Spec.Volumes)
	}
	if err := g.governed(g.pod); err != nil {
		t.Errorf("the pod so injected is not governed: %v", err)
	}
	again := g.pod.DeepCopy()
	if _, err := g.inject(again); err != nil || !equality.Semantic.DeepEqual(again.Spec, g.pod.Spec) {
		t.Errorf("a second pass changed the pod (%v)", err)
	}

	// The agent mounting the token is refused.
	stolen := examplePod(t, "sandbox-pod-labelled.yaml", p.Namespace)
	stolen.Spec.Containers[0].VolumeMounts = append(stolen.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: VolumeConfirmerToken, MountPath: "/token", ReadOnly: true})
	g, refused = h.governing(t.Context(), createRequest(t, stolen))
	if refused != nil {
		t.Fatalf("refused: %v", refused.Result)
	}
	if _, err := g.inject(g.pod); err == nil || !strings.Contains(err.Error(), "container agent mounts volume "+VolumeConfirmerToken) {
		t.Errorf("a governed container mounting the token: %v, want a conflict", err)
	}

	// No Service: the pod is refused, naming the SessionConfirmer.
	if _, refused := injector().governing(t.Context(), createRequest(t, pod)); refused == nil || !strings.Contains(refused.Result.Message, `SessionConfirmer "coding-agents"`) {
		t.Errorf("a confirmer without its Service: %+v, want a refusal naming it", refused)
	}
}
