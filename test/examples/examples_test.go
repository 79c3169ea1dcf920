// Package examples applies the documentation's examples to a real API server (envtest) with
// server-side dry-run, so the docs cannot drift into manifests the API server rejects.
package examples

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/confirmerconfig"
	"github.com/intutic/gate-operator/internal/testutil"
	"github.com/intutic/gate-operator/internal/webhook"
)

func read(t *testing.T, name string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
}

func TestExamples(t *testing.T) {
	cfg := apiservertest.Start(t, false)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testutil.Context(t, time.Minute)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}); err != nil {
		t.Fatal(err)
	}

	// The sample policy's selector, which the pods must match.
	policy := &gatev1.HarnessAgentPolicy{}
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "gate_v1alpha1_harnessagentpolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, policy); err != nil {
		t.Fatal(err)
	}
	selector, err := metav1.LabelSelectorAsSelector(&policy.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}

	check := func(t *testing.T, pod *unstructured.Unstructured) {
		t.Helper()
		if !selector.Matches(labels.Set(pod.GetLabels())) {
			t.Fatalf("the pod's labels %v do not match the policy's podSelector %s", pod.GetLabels(), selector)
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(pod), client.DryRunAll, client.FieldOwner("docs-test"), client.ForceOwnership); err != nil {
			t.Fatalf("the API server rejects the example: %v", err)
		}
		typed := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(pod.Object, typed); err != nil {
			t.Fatal(err)
		}
		mounts := map[string]string{}
		for _, m := range typed.Spec.Containers[0].VolumeMounts {
			mounts[m.MountPath] = m.Name
			// Gemini CLI's system settings alone are a sub-path (its directory must be the
			// image's, root-owned 0755); everything kubelet must keep current is not.
			if m.SubPath != "" && m.Name != "gemini-system-settings" {
				t.Errorf("%s uses subPath: kubelet would never update it", m.MountPath)
			}
		}
		for _, p := range []string{"/opt/intutic/bin", "/opt/intutic/hooks", "/etc/claude-code", "/etc/codex", "/etc/gemini-cli/settings.json"} {
			if mounts[p] == "" {
				t.Errorf("nothing is mounted at %s", p)
			}
		}
		inits := typed.Spec.InitContainers
		if len(inits) != 3 || inits[0].Command[1] != "--install" {
			t.Fatalf("the first init container must install gate-hook: %+v", inits)
		}
		if inits[1].Command[0] != "/egress-wait" {
			t.Errorf("the second init container must wait for the egress policy (/egress-wait), so nothing of the pod starts ungoverned: %+v", inits)
		}
		if inits[2].Command[0] != "/gate-agent" || inits[2].RestartPolicy == nil || *inits[2].RestartPolicy != corev1.ContainerRestartPolicyAlways || inits[2].StartupProbe == nil {
			t.Errorf("the third init container must be the gate-agent native sidecar with a startup probe: %+v", inits[2])
		}
	}

	t.Run("pod", func(t *testing.T) {
		pod := &unstructured.Unstructured{}
		read(t, "sandbox-pod.yaml", &pod.Object)
		check(t, pod)
	})
	// The example names the canary Service, which a deny-all pod cannot resolve; the injection
	// owns wait-for-egress-policy and writes the Service's ClusterIP in its place, and a second
	// injection changes nothing.
	t.Run("pod injected", func(t *testing.T) {
		pod := &corev1.Pod{}
		read(t, "sandbox-pod.yaml", pod)
		if cmd := pod.Spec.InitContainers[1].Command; !slices.Contains(cmd, "gate-operator-egress-canary.gate-system.svc:9444") {
			t.Errorf("the example's egress-wait %q does not show the canary Service's name", cmd)
		}
		o := webhook.InjectOptions{GateHookImage: pod.Spec.InitContainers[0].Image, EgressCanary: webhook.DefaultEgressCanary}
		o.EgressCanary.Host = "10.96.0.44"
		written := pod.DeepCopy()
		if _, err := webhook.Inject(pod, "coding-agents", o); err != nil {
			t.Fatal(err)
		}
		inits := pod.Spec.InitContainers
		if len(inits) != 3 || !equality.Semantic.DeepEqual(inits[0], written.Spec.InitContainers[0]) || inits[1].Name != webhook.EgressWaitContainerName ||
			!equality.Semantic.DeepEqual(inits[2], written.Spec.InitContainers[2]) {
			t.Fatalf("init containers %+v", inits)
		}
		want := written.Spec.InitContainers[1]
		want.Command = []string{"/egress-wait", "--control", "10.96.0.44:9444", "--denied", "10.96.0.44:9445", "--timeout", "60s"}
		if !equality.Semantic.DeepEqual(inits[1], want) {
			t.Errorf("injected wait-for-egress-policy %+v, want the example's with the ClusterIP %+v", inits[1], want)
		}
		if !equality.Semantic.DeepEqual(pod.Spec.Containers, written.Spec.Containers) || !equality.Semantic.DeepEqual(pod.Spec.Volumes, written.Spec.Volumes) {
			t.Errorf("the injection changed more of the example than its egress-wait's address")
		}
		again := pod.DeepCopy()
		if _, err := webhook.Inject(again, "coding-agents", o); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(again, pod) {
			t.Error("a second injection changed the pod")
		}
	})
	t.Run("sandboxtemplate", func(t *testing.T) {
		tmpl := map[string]any{}
		read(t, "sandboxtemplate.yaml", &tmpl)
		spec := tmpl["spec"].(map[string]any)
		if spec["networkPolicyManagement"] != "Unmanaged" {
			t.Fatalf("a governed template must set networkPolicyManagement: Unmanaged, got %v", spec["networkPolicyManagement"])
		}
		pt := spec["podTemplate"].(map[string]any)
		meta := pt["metadata"].(map[string]any)
		meta["name"] = "template-pod"
		meta["namespace"] = "agents"
		pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pt["spec"]}}
		check(t, pod)
	})
}

// TestGateAPICallerExample: the gate API caller in the docs is accepted by the API server and
// projects a token for the sample SessionConfirmer's audience, the one the controller gives that
// confirmer, with the default token left out.
func TestGateAPICallerExample(t *testing.T) {
	cfg := apiservertest.Start(t, false)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testutil.Context(t, time.Minute)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}); err != nil {
		t.Fatal(err)
	}
	sc := &gatev1.SessionConfirmer{}
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "gate_v1alpha1_sessionconfirmer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, sc); err != nil {
		t.Fatal(err)
	}
	pod := &unstructured.Unstructured{}
	read(t, "gate-api-caller-pod.yaml", &pod.Object)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(pod), client.DryRunAll, client.FieldOwner("docs-test"), client.ForceOwnership); err != nil {
		t.Fatalf("the API server rejects the example: %v", err)
	}
	typed := &corev1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(pod.Object, typed); err != nil {
		t.Fatal(err)
	}
	if typed.Spec.AutomountServiceAccountToken == nil || *typed.Spec.AutomountServiceAccountToken {
		t.Error("the caller mounts its default token, which the confirmer refuses")
	}
	want := confirmerconfig.TokenAudience(sc.Namespace, sc.Name)
	found := false
	for _, v := range typed.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				found = s.ServiceAccountToken.Audience == want
			}
		}
	}
	if !found {
		t.Errorf("the caller projects no token for the sample confirmer's audience %s", want)
	}
}
