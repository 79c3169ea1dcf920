package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/testutil"
)

// upgradeNS holds the pod started under the previous release.
const upgradeNS = "upgrade"

// installByUpgrade installs the operator the way an existing user gets this tree: the previous
// release (localenv.PreviousRelease, the last tree before cluster policies) is installed with
// its own chart and images, a governed sandbox pod is started under it, and the release is
// upgraded to this tree's chart and images with values while a loop keeps calling that pod's
// hook. The pod keeps the gate-hook it copied at start. It proves the version-skew rule of
// docs/fleet.md on the node:
//   - every call made during the upgrade is decided as the policy says (no call refused by a
//     fault, none let through);
//   - the bundle this tree's manager writes for a namespace policy has the keys the previous
//     release's had, and a policy edit made after the upgrade reaches the old pod's hook, which
//     decides with it;
//   - when a cluster policy first selects the namespace, the old hook refuses every call (it
//     cannot read cluster layers), and decides again once the cluster policy is gone.
//
// The rest of the e2e then runs on the upgraded installation.
func installByUpgrade(ctx context.Context, t *testing.T, env *localenv.Env, values []string) {
	prev, err := env.BuildRelease(ctx, localenv.PreviousRelease)
	must(t, err)
	env.Step("installing the previous release %s (its chart, images tagged %s)", prev.Commit[:7], prev.Tag)
	must(t, env.InstallChartFrom(ctx, prev.Chart(), slices.Concat(values, prev.Values())...))

	c := env.Client
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: upgradeNS}}))
	policy := &gatev1.HarnessAgentPolicy{}
	must(t, env.ReadSample("gate_v1alpha1_harnessagentpolicy.yaml", policy))
	policy.Namespace = upgradeNS
	must(t, c.Create(ctx, policy))
	policyKey := client.ObjectKeyFromObject(policy)
	wait(t, "the policy is Ready under the previous release", func() bool {
		return c.Get(ctx, policyKey, policy) == nil && meta.IsStatusConditionTrue(policy.Status.Conditions, gatev1.ConditionReady)
	})
	bundleKey := types.NamespacedName{Namespace: upgradeNS, Name: policy.Name + "-bootstrap"}
	before := &corev1.ConfigMap{}
	must(t, c.Get(ctx, bundleKey, before))

	// The release's own example pod, as its users wrote it.
	manifest, err := os.ReadFile(filepath.Join(prev.Tree, "docs", "examples", "sandbox-pod.yaml"))
	must(t, err)
	pod := strings.Replace(strings.Replace(string(manifest), "registry.example/coding-agent:1.0", localenv.TestbedImage, 1),
		"namespace: "+ns, "namespace: "+upgradeNS, 1)
	sandbox, err := env.ApplyPod(ctx, upgradeNS, pod)
	must(t, err)
	hook := func(tool, input string) (string, int, error) {
		return env.Hook(ctx, upgradeNS, sandbox, "agent", tool, input)
	}
	// blocked and allowed say whether a call got the answer the policy gives it.
	blocked := func(out string, code int) bool {
		return code == 2 && strings.Contains(out, `"permissionDecision":"deny"`) && strings.Contains(out, "destructive command")
	}
	allowed := func(out string, code int) bool { return code == 0 && !strings.Contains(out, "deny") }
	if out, code, err := hook("Bash", `{"command":"rm -rf /"}`); err != nil || !blocked(out, code) {
		t.Fatalf("under the previous release, a blocked Bash: exit %d, %v, %s", code, err, out)
	}
	if out, code, err := hook("Read", `{"file_path":"/workspace/README.md"}`); err != nil || !allowed(out, code) {
		t.Fatalf("under the previous release, an allowed Read: exit %d, %v, %s", code, err, out)
	}

	// Calls go on, one after the other, while helm upgrades the release.
	var (
		mu      sync.Mutex
		calls   int
		wrong   []string
		stopped = make(chan struct{})
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopped:
				return
			default:
			}
			tool, input, want := "Bash", `{"command":"rm -rf /"}`, blocked
			if i%2 == 1 {
				tool, input, want = "Read", `{"file_path":"/workspace/README.md"}`, allowed
			}
			out, code, err := hook(tool, input)
			mu.Lock()
			calls++
			if err != nil || !want(out, code) {
				wrong = append(wrong, fmt.Sprintf("%s: exit %d, %v, %s", tool, code, err, strings.TrimSpace(out)))
			}
			mu.Unlock()
		}
	})
	start := time.Now()
	upgradeErr := env.UpgradeChart(ctx, values...)
	took := time.Since(start)
	close(stopped)
	wg.Wait()
	must(t, upgradeErr)
	t.Logf("upgrade: helm upgrade took %s; the old pod's hook decided %d calls meanwhile, %d wrongly", took.Round(time.Second), calls, len(wrong))
	if len(wrong) > 0 {
		t.Fatalf("calls decided wrongly during the upgrade: %s", strings.Join(wrong, "; "))
	}
	if calls < 10 {
		t.Fatalf("only %d calls were made during the upgrade", calls)
	}

	// This tree's manager owns the bundle now: an edit is rendered by it and reaches the old
	// pod's hook, whose binary is the previous release's.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, policyKey, policy); err != nil {
			return err
		}
		policy.Spec.Rules[0].Reason = "destructive command on the root filesystem, after the upgrade"
		return c.Update(ctx, policy)
	}))
	after := &corev1.ConfigMap{}
	wait(t, "this tree's manager renders the edited policy", func() bool {
		return c.Get(ctx, policyKey, policy) == nil && policy.Status.ObservedGeneration == policy.Generation &&
			c.Get(ctx, bundleKey, after) == nil && strings.Contains(after.Data[gate.SnapshotFileName], "after the upgrade")
	})
	// The same files, and the managed configuration of the runtimes this release added.
	added := []string{bootstrap.KeyCodexManagedConfig, bootstrap.KeyCodexRequirements, bootstrap.KeyGeminiSettings}
	if got, want := slices.Sorted(maps.Keys(after.Data)), slices.Compact(slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(before.Data)), added...)))); !slices.Equal(got, want) {
		t.Errorf("the bundle of a namespace policy has keys %v after the upgrade, want %v: those before and %v", got, want, added)
	}
	start = time.Now()
	// The old pod's hook decides with the edit.
	testutil.Eventually(t, 3*time.Minute, func() error {
		out, code, err := hook("Bash", `{"command":"rm -rf /"}`)
		if err != nil || code != 2 || !strings.Contains(out, "after the upgrade") {
			return fmt.Errorf("exit %d, %v, %s", code, err, out)
		}
		return nil
	})
	t.Logf("upgrade: the edit reached the previous release's hook %s after the manager rendered it", time.Since(start).Round(time.Second))
	if out, code, err := hook("Read", `{"file_path":"/workspace/README.md"}`); err != nil || !allowed(out, code) {
		t.Errorf("after the edit, an allowed Read in the old pod: exit %d, %v, %s", code, err, out)
	}

	// A cluster policy selecting the namespace: the old hook cannot decide its layers, so every
	// call is refused, and decided again once it is gone.
	chap := &gatev1.ClusterHarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-upgrade"},
		Spec: gatev1.ClusterHarnessAgentPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: upgradeNS}},
		},
	}
	must(t, c.Create(ctx, chap))
	// The old pod's hook refuses every call under a cluster layer.
	testutil.Eventually(t, 3*time.Minute, func() error {
		out, code, err := hook("Read", `{"file_path":"/workspace/README.md"}`)
		if err != nil || code != 2 || !strings.Contains(out, gate.RefusalPrefix) {
			return fmt.Errorf("exit %d, %v, %s", code, err, out)
		}
		return nil
	})
	must(t, c.Delete(ctx, chap))
	// The old pod's hook decides again without the cluster layer.
	testutil.Eventually(t, 3*time.Minute, func() error {
		out, code, err := hook("Read", `{"file_path":"/workspace/README.md"}`)
		if err != nil || !allowed(out, code) {
			return fmt.Errorf("exit %d, %v, %s", code, err, out)
		}
		return nil
	})

	// The namespace and its pod are not part of the rest of the e2e.
	must(t, c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: upgradeNS}}))
}
