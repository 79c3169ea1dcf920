package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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
		"the manager's flags": {EgressCanary{Host: "10.96.0.9", ControlPort: 1444, DeniedPort: 1445}, []string{"/egress-wait",
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

// TestPodInjectorResolvesTheCanary: a deny-all pod cannot resolve names, so the webhook writes
// the canary Service's address; a canary it cannot resolve refuses the pod.
func TestPodInjectorResolvesTheCanary(t *testing.T) {
	p := samplePolicy(t)
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(p).Build()
	var asked []string
	h := &PodInjector{Reader: reader, Options: InjectOptions{GateHookImage: testGateHookImage,
		EgressCanary: EgressCanary{Host: "canary.gate-system.svc", ControlPort: 9444, DeniedPort: 9445}},
		LookupHost: func(_ context.Context, host string) ([]string, error) {
			asked = append(asked, host)
			return []string{"10.96.0.44"}, nil
		}}
	resp := h.Handle(t.Context(), createRequest(t, examplePod(t, "sandbox-pod-labelled.yaml", p.Namespace)))
	if !resp.Allowed {
		t.Fatalf("refused: %v", resp.Result)
	}
	if !slices.Equal(asked, []string{"canary.gate-system.svc"}) {
		t.Fatalf("looked up %q", asked)
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

	h.LookupHost = func(context.Context, string) ([]string, error) { return nil, errors.New("no such host") }
	if resp := h.Handle(t.Context(), createRequest(t, examplePod(t, "sandbox-pod-labelled.yaml", p.Namespace))); resp.Allowed {
		t.Fatal("a pod was admitted with a canary that does not resolve")
	}
	h.LookupHost = func(context.Context, string) ([]string, error) { return []string{"not-an-ip"}, nil }
	if resp := h.Handle(t.Context(), createRequest(t, examplePod(t, "sandbox-pod-labelled.yaml", p.Namespace))); resp.Allowed {
		t.Fatal("a pod was admitted with a canary that resolved to no address")
	}
}

func patchPaths(ops []jsonpatch.Operation) []string {
	var out []string
	for _, op := range ops {
		out = append(out, op.Operation+" "+op.Path)
	}
	return out
}
