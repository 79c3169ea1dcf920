package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/localenv"
)

// fleetLabel is the namespace label the e2e's cluster policy selects by.
const fleetLabel = "gate.intutic.io/e2e-fleet"

// testClusterBaseline: a cluster policy selecting the sandbox pod's namespace reaches the
// running pod without a restart, and its Block holds inside the pod against the namespace
// policy's Allow; removing it lifts the Block the same way. The call is one the sample policy
// allows (exit 0 before and after).
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

	must(t, c.Delete(ctx, chap))
	start = time.Now()
	wait(t, "the Block is lifted once the cluster policy is gone", func() bool {
		_, code := bash(call)
		return code == 0
	})
	t.Logf("removing the cluster layer reached the running pod after %s", time.Since(start).Round(time.Second))
}
