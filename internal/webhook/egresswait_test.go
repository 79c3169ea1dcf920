package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

func egressWaitCommand(t *testing.T, pod *corev1.Pod) []string {
	t.Helper()
	for _, c := range pod.Spec.InitContainers {
		if c.Name == EgressWaitContainerName {
			return c.Command
		}
	}
	t.Fatalf("no %s init container", EgressWaitContainerName)
	return nil
}

// TestEgressWaitNamesTheCanary: the injected egress-wait is given the manager's canary, its
// control and its denied port, and never runs without them (a failed connection alone proves
// nothing; cmd/egress-wait).
func TestEgressWaitNamesTheCanary(t *testing.T) {
	for name, tc := range map[string]struct {
		canary EgressCanary
		want   []string
	}{
		"the default install": {EgressCanary{}, []string{"/egress-wait",
			"--control", "gate-operator-egress-canary.gate-system.svc:9444", "--denied", "gate-operator-egress-canary.gate-system.svc:9445", "--timeout", "60s"}},
		"the manager's flags": {EgressCanary{Service: "canary", Namespace: "ops", ControlPort: 1444, DeniedPort: 1445}, []string{"/egress-wait",
			"--control", "canary.ops.svc:1444", "--denied", "canary.ops.svc:1445", "--timeout", "60s"}},
		"the Service's ClusterIP": {EgressCanary{Host: "10.96.0.9", ControlPort: 1444, DeniedPort: 1445}, []string{"/egress-wait",
			"--control", "10.96.0.9:1444", "--denied", "10.96.0.9:1445", "--timeout", "60s"}},
		"IPv6": {EgressCanary{Host: "fd00::9", ControlPort: 1444, DeniedPort: 1445}, []string{"/egress-wait",
			"--control", "[fd00::9]:1444", "--denied", "[fd00::9]:1445", "--timeout", "60s"}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{gatev1.LabelPolicy: "p"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent"}}}}
			if _, err := Inject(pod, "p", InjectOptions{GateHookImage: "img", EgressCanary: tc.canary}); err != nil {
				t.Fatal(err)
			}
			if got := egressWaitCommand(t, pod); !slices.Equal(got, tc.want) {
				t.Fatalf("egress-wait command %q, want %q", got, tc.want)
			}
		})
	}
}

// canaryService is the egress canary Service of c, with the given ClusterIP.
func canaryService(c EgressCanary, clusterIP string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Service},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP, Ports: []corev1.ServicePort{{Name: "canary-control", Port: c.ControlPort}}}}
}

// TestPodInjectorReadsTheCanaryService: a deny-all pod cannot resolve names, so the webhook
// writes the ClusterIP of the canary Service, read from the API server (no DNS at admission); a
// Service that is missing, headless or without a ClusterIP refuses the pod, and one that cannot
// be read is an internal error: never a pod admitted with a name or no address.
func TestPodInjectorReadsTheCanaryService(t *testing.T) {
	p := samplePolicy(t)
	canary := EgressCanary{Service: "canary", Namespace: "gate-system", ControlPort: 9444, DeniedPort: 9445}
	injector := func(objs ...client.Object) *PodInjector {
		return &PodInjector{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(objs, p)...).Build(),
			Options: InjectOptions{GateHookImage: testGateHookImage, EgressCanary: canary}}
	}
	h := injector(canaryService(canary, "10.96.0.44"))
	resp := h.Handle(t.Context(), createRequest(t, examplePod(t, "sandbox-pod-labelled.yaml", p.Namespace)))
	if !resp.Allowed {
		t.Fatalf("refused: %v", resp.Result)
	}
	var cmd []string
	for _, op := range resp.Patches {
		if op.Path != "/spec/initContainers" {
			continue
		}
		b, _ := json.Marshal(op.Value)
		var inits []corev1.Container
		if err := json.Unmarshal(b, &inits); err != nil {
			t.Fatal(err)
		}
		for _, c := range inits {
			if c.Name == EgressWaitContainerName {
				cmd = c.Command
			}
		}
	}
	if want := []string{"/egress-wait", "--control", "10.96.0.44:9444", "--denied", "10.96.0.44:9445", "--timeout", "60s"}; !slices.Equal(cmd, want) {
		t.Fatalf("egress-wait command %q, want %q (patches %v)", cmd, want, patchPaths(resp.Patches))
	}

	other := canaryService(canary, "10.96.0.45")
	other.Namespace = "elsewhere"
	for name, tc := range map[string]struct {
		h    *PodInjector
		code int32
		says string
	}{
		"missing":             {injector(other), http.StatusForbidden, "egress canary Service gate-system/canary does not exist"},
		"headless":            {injector(canaryService(canary, corev1.ClusterIPNone)), http.StatusForbidden, `has no ClusterIP ("None"`},
		"without a ClusterIP": {injector(canaryService(canary, "")), http.StatusForbidden, `has no ClusterIP (""`},
		"unreadable": {&PodInjector{Options: h.Options, Reader: interceptor.NewClient(h.Reader.(client.WithWatch), interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.Service); ok {
					return errors.New("etcdserver: request timed out")
				}
				return c.Get(ctx, key, obj, opts...)
			}})}, http.StatusInternalServerError, "egress canary Service gate-system/canary could not be read"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := tc.h.Handle(t.Context(), createRequest(t, examplePod(t, "sandbox-pod-labelled.yaml", p.Namespace)))
			if resp.Allowed {
				t.Fatal("the pod was admitted")
			}
			if resp.Result.Code != tc.code || !strings.Contains(resp.Result.Message, tc.says) {
				t.Fatalf("answer %d %q, want %d saying %q", resp.Result.Code, resp.Result.Message, tc.code, tc.says)
			}
			if strings.Contains(resp.Result.Message, "etcdserver") {
				t.Errorf("the answer quotes the API error: %q", resp.Result.Message)
			}
		})
	}
}

// patchPaths lists a response's patches as "op path", sorted: the patch is computed from a JSON
// diff whose object keys come in map order, so the order of its operations is not stable.
func patchPaths(ops []jsonpatch.Operation) []string {
	var out []string
	for _, op := range ops {
		out = append(out, op.Operation+" "+op.Path)
	}
	slices.Sort(out)
	return out
}

// TestInjectOwnsTheEgressWait: a pod written by hand (docs/examples/sandbox-pod.yaml) has its
// install-gate-hook, wait-for-egress-policy and gate-agent replaced by the rendered ones, first,
// wherever it put them: the example dials the canary Service's DNS name, which a deny-all pod cannot
// resolve. Injecting again changes nothing further.
func TestInjectOwnsTheEgressWait(t *testing.T) {
	o := InjectOptions{GateHookImage: testGateHookImage, EgressCanary: EgressCanary{Host: "10.96.0.44"}}
	pod := examplePod(t, "sandbox-pod.yaml", "agents")
	written := pod.DeepCopy()
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: "own-init", Image: "registry.example/init:1"})
	pod.Spec.InitContainers[1], pod.Spec.InitContainers[2] = pod.Spec.InitContainers[2], pod.Spec.InitContainers[1]
	pod.Spec.InitContainers[2].Image = "registry.example/other:1"
	pod.Spec.InitContainers[2].SecurityContext = nil
	if _, err := Inject(pod, "coding-agents", o); err != nil {
		t.Fatal(err)
	}
	inits := pod.Spec.InitContainers
	if len(inits) != 4 || inits[0].Name != InstallContainerName || inits[1].Name != EgressWaitContainerName || inits[2].Name != GateAgentContainerName || inits[3].Name != "own-init" {
		t.Fatalf("init containers %v", inits)
	}
	if !equality.Semantic.DeepEqual(inits[0], written.Spec.InitContainers[0]) {
		t.Errorf("install-gate-hook is not the example's, which is the rendered one: %+v", inits[0])
	}
	want := egressWaitContainer(o)
	if !equality.Semantic.DeepEqual(inits[1], want) {
		t.Errorf("wait-for-egress-policy %+v, want the rendered %+v", inits[1], want)
	}
	if want := []string{"/egress-wait", "--control", "10.96.0.44:9444", "--denied", "10.96.0.44:9445", "--timeout", "60s"}; !slices.Equal(inits[1].Command, want) {
		t.Errorf("egress-wait command %q, want %q", inits[1].Command, want)
	}
	again := pod.DeepCopy()
	if _, err := Inject(again, "coding-agents", o); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(again, pod) {
		t.Errorf("a second injection changed the pod:\n%s\nthen\n%s", toYAML(t, pod.Spec), toYAML(t, again.Spec))
	}
}
