package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/localenv"
)

// fleetLabel is the namespace label the e2e's cluster policy selects by.
const fleetLabel = "gate.intutic.io/e2e-fleet"

// testClusterBaseline: a cluster policy selecting the sandbox pod's namespace reaches the
// running pod without a restart, and its Block holds inside the pod against the namespace
// policy's Allow; a GateException lifts that rule in the running pod and, with the manager
// stopped, stops being honoured at its expiresAt by the hook's own clock; removing the cluster
// policy lifts the Block the same way. The call is one the sample policy allows (exit 0 before
// and after).
func testClusterBaseline(ctx context.Context, t *testing.T, env *localenv.Env, sandbox string) {
	c := env.Client
	const call = `{"command":"echo fleet-marker"}`
	bash := func(input string) (string, int) {
		out, code, err := env.Hook(ctx, ns, sandbox, "agent", "Bash", input)
		must(t, err)
		return out, code
	}
	if out, code := bash(call); code != 0 {
		t.Fatalf("the namespace policy alone must allow the marker call: exit %d, %s", code, out)
	}

	nsObj := &corev1.Namespace{}
	must(t, c.Get(ctx, types.NamespacedName{Name: ns}, nsObj))
	patch := client.MergeFrom(nsObj.DeepCopy())
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	nsObj.Labels[fleetLabel] = "yes"
	must(t, c.Patch(ctx, nsObj, patch))
	defer func() {
		cur := &corev1.Namespace{}
		if c.Get(ctx, types.NamespacedName{Name: ns}, cur) == nil {
			p := client.MergeFrom(cur.DeepCopy())
			delete(cur.Labels, fleetLabel)
			_ = c.Patch(ctx, cur, p)
		}
	}()

	chap := &gatev1.ClusterHarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-baseline"},
		Spec: gatev1.ClusterHarnessAgentPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{fleetLabel: "yes"}},
			Rules: []gatev1.Rule{{Name: "no-fleet-marker", Tools: []string{"Bash"}, When: `input.command.contains("fleet-marker")`,
				Action: gatev1.ActionBlock, Reason: "the platform baseline forbids the fleet marker", Code: "fleet_marker"}},
			Exceptions: &gatev1.ClusterExceptionPolicy{
				NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{fleetLabel: "yes"}},
				MaxDuration:       metav1.Duration{Duration: 10 * time.Minute},
			},
		},
	}
	// The webhook judges it (failurePolicy Fail): a broken one is refused at apply.
	broken := chap.DeepCopy()
	broken.Name = "e2e-broken"
	broken.Spec.Rules[0].When = `has(inptu.command)`
	if err := c.Create(ctx, broken); err == nil {
		_ = c.Delete(ctx, broken)
		t.Error("the API server admitted a cluster policy whose rule does not compile")
	}
	must(t, c.Create(ctx, chap))
	defer func() { _ = c.Delete(ctx, chap) }()
	wait(t, "the cluster policy is Ready and governs the namespace", func() bool {
		got := &gatev1.ClusterHarnessAgentPolicy{}
		return c.Get(ctx, client.ObjectKeyFromObject(chap), got) == nil &&
			meta.IsStatusConditionTrue(got.Status.Conditions, gatev1.ConditionReady) && got.Status.Namespaces >= 1 && got.Status.Pods >= 1
	})
	start := time.Now()
	var out string
	wait(t, "the running sandbox pod's hook blocks the marker call by the cluster layer", func() bool {
		var code int
		out, code = bash(call)
		return code == 2 && strings.Contains(out, "the platform baseline forbids the fleet marker")
	})
	t.Logf("the cluster layer reached the running pod %s after %s: %s", sandbox, time.Since(start).Round(time.Second), strings.TrimSpace(out))
	if out, code := bash(`{"command":"rm -rf /"}`); code != 2 || !strings.Contains(out, "destructive command") {
		t.Errorf("the namespace policy's own Block under the cluster layer: exit %d, %s", code, out)
	}
	testUnlabelledPodIsGoverned(ctx, t, env, call)

	testExceptionExpiresInThePod(ctx, t, env, bash, call, chap.Name)

	must(t, c.Delete(ctx, chap))
	start = time.Now()
	wait(t, "the Block is lifted once the cluster policy is gone", func() bool {
		_, code := bash(call)
		return code == 0
	})
	t.Logf("removing the cluster layer reached the running pod after %s", time.Since(start).Round(time.Second))
}

// exceptionLife is how long the e2e's exception lasts: long enough for the kubelet to deliver
// it to the running pod (13 to 60 s), short enough to wait for.
const exceptionLife = 100 * time.Second

// testExceptionExpiresInThePod: a GateException of the baseline's rule lifts it in the running
// pod; then the manager is stopped (its Deployment scaled to zero), and at expiresAt the pod's
// hook refuses the call again by its own clock, with nobody to update the bundle.
func testExceptionExpiresInThePod(ctx context.Context, t *testing.T, env *localenv.Env, bash func(string) (string, int), call, policy string) {
	c := env.Client
	expires := time.Now().Add(exceptionLife).Truncate(time.Second)
	gex := &gatev1.GateException{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-lift-marker"},
		Spec: gatev1.GateExceptionSpec{
			PolicyRef: gatev1.ExceptionPolicyRef{Kind: gatev1.ExceptionOfClusterPolicy, Name: policy},
			Rules:     []gatev1.RuleName{"no-fleet-marker"}, ExpiresAt: metav1.NewTime(expires),
			Reason: "e2e: the marker is needed for a minute", Ticket: "E2E-1",
		},
	}
	must(t, c.Create(ctx, gex))
	defer func() { _ = c.Delete(ctx, gex) }()
	wait(t, "the exception is Active and names its requester", func() bool {
		got := &gatev1.GateException{}
		return c.Get(ctx, client.ObjectKeyFromObject(gex), got) == nil && got.Status.Phase == gatev1.ExceptionActive && got.Status.RequestedBy != ""
	})
	start := time.Now()
	wait(t, "the running pod's hook honours the exception", func() bool {
		_, code := bash(call)
		return code == 0
	})
	t.Logf("the exception reached the running pod after %s; it expires at %s", time.Since(start).Round(time.Second), expires.Format(time.RFC3339))
	if time.Now().After(expires.Add(-10 * time.Second)) {
		t.Fatalf("the exception reached the pod too late to see it expire (%s before expiresAt)", time.Until(expires))
	}

	// Stop the manager: nothing can change the bundle from here on.
	key := types.NamespacedName{Namespace: localenv.OperatorNamespace, Name: "gate-operator"}
	dep := &appsv1.Deployment{}
	must(t, c.Get(ctx, key, dep))
	replicas := *dep.Spec.Replicas
	scale := func(n int32) {
		t.Helper()
		cur := &appsv1.Deployment{}
		must(t, c.Get(ctx, key, cur))
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Replicas = &n
		must(t, c.Patch(ctx, cur, patch))
	}
	scale(0)
	defer func() {
		scale(replicas)
		wait(t, "the manager is back", func() bool {
			cur := &appsv1.Deployment{}
			return c.Get(ctx, key, cur) == nil && cur.Status.ReadyReplicas == replicas && cur.Status.UpdatedReplicas == replicas
		})
	}()
	wait(t, "the manager is stopped", func() bool {
		var pods corev1.PodList
		return c.List(ctx, &pods, client.InNamespace(localenv.OperatorNamespace), client.MatchingLabels(dep.Spec.Selector.MatchLabels)) == nil && len(pods.Items) == 0
	})
	if out, code := bash(call); code != 0 {
		t.Fatalf("before expiresAt, with the manager stopped: exit %d, %s", code, out)
	}
	testOutageScope(ctx, t, env)
	time.Sleep(time.Until(expires))
	out, code := bash(call)
	if code != 2 || !strings.Contains(out, "the platform baseline forbids the fleet marker") {
		t.Fatalf("at expiresAt, with the manager stopped, the hook still honours the exception: exit %d, %s", code, out)
	}
	t.Logf("at expiresAt (+%s) with the manager stopped, the hook refuses again: %s", time.Since(expires).Round(time.Millisecond), strings.TrimSpace(out))
}

// unlabelledPod is the sandbox of docs/examples/sandbox-pod-labelled.yaml without the opt-in
// label (and without anything else of the gate's), in namespace ns.
func unlabelledPod(t *testing.T, env *localenv.Env, name, namespace string) *corev1.Pod {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.Root, "docs", "examples", "sandbox-pod-labelled.yaml"))
	must(t, err)
	pod := &corev1.Pod{}
	must(t, yaml.UnmarshalStrict(b, pod))
	delete(pod.Labels, gatev1.LabelPolicy)
	pod.Name, pod.Namespace = name, namespace
	pod.Spec.Containers[0].Image = localenv.TestbedImage
	return pod
}

// testUnlabelledPodIsGoverned: a pod without the opt-in label, in a namespace the cluster policy
// selects and that no namespace policy selects, is injected with the namespace's baseline
// bundle and governed by the cluster layer alone: the marker call is refused inside it.
func testUnlabelledPodIsGoverned(ctx context.Context, t *testing.T, env *localenv.Env, call string) {
	c := env.Client
	pod := unlabelledPod(t, env, "fleet-unlabelled", ns)
	wait(t, "the baseline bundle is published in the namespace", func() bool {
		cm := &corev1.ConfigMap{}
		return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: bootstrap.BaselineConfigMap}, cm) == nil
	})
	must(t, c.Create(ctx, pod))
	defer func() { _ = c.Delete(ctx, pod) }()
	if pod.Labels[gatev1.LabelBaseline] != "true" {
		t.Errorf("the unlabelled pod was not labelled for the baseline: %v", pod.Labels)
	}
	inits := make([]string, 0, len(pod.Spec.InitContainers))
	for _, ic := range pod.Spec.InitContainers {
		inits = append(inits, ic.Name)
	}
	t.Logf("unlabelled pod %s injected: init containers %v, labels %v", pod.Name, inits, pod.Labels)
	_, err := env.Kubectl(ctx, "", "-n", ns, "wait", "--for=condition=Ready", "pod/"+pod.Name, "--timeout=120s")
	must(t, err)
	out, code, err := env.Hook(ctx, ns, pod.Name, "agent", "Bash", call)
	must(t, err)
	if code != 2 || !strings.Contains(out, "the platform baseline forbids the fleet marker") {
		t.Errorf("the marker call in the unlabelled pod: exit %d, %s; want the cluster layer's Block", code, out)
	} else {
		t.Logf("the unlabelled pod's hook refuses the marker call: %s", strings.TrimSpace(out))
	}
	if out, code, err := env.Hook(ctx, ns, pod.Name, "agent", "Bash", `{"command":"echo fine"}`); err != nil || code != 0 {
		t.Errorf("a call the baseline allows, in the unlabelled pod: exit %d, %v, %s", code, err, out)
	}
}

// testOutageScope, with the manager stopped: a pod the cluster policy selects is refused (its
// webhook entry is failurePolicy Fail), and a pod in a namespace no policy selects is admitted.
// Both are server-side dry runs: nothing is created.
func testOutageScope(ctx context.Context, t *testing.T, env *localenv.Env) {
	c := env.Client
	selected := unlabelledPod(t, env, "outage-selected", ns)
	err := c.Create(ctx, selected, client.DryRunAll)
	if err == nil {
		t.Error("with the manager stopped, a pod the cluster policy selects was admitted")
	} else {
		t.Logf("with the manager stopped, a pod the cluster policy selects is refused: %v", err)
	}
	other := unlabelledPod(t, env, "outage-other", metav1.NamespaceDefault)
	if err := c.Create(ctx, other, client.DryRunAll); err != nil {
		t.Errorf("with the manager stopped, a pod no policy selects (namespace default) was refused: %v", err)
	} else {
		t.Log("with the manager stopped, a pod no policy selects (namespace default) is admitted")
	}
}
