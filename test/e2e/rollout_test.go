package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/webhook"
)

// rolloutSettle is how long the creates go on after `kubectl rollout status` says the rollout is
// complete: the last old pod is then still draining its webhook server (--webhook-shutdown-delay,
// 5 s) and stopping.
const rolloutSettle = 15 * time.Second

// testManagerRollout restarts the manager Deployment (kubectl rollout restart: with the chart's
// defaults, two replicas replaced one at a time, each new one ready, its webhook server serving
// its certificate, before an old one stops and drains) while a loop creates governed pods
// (server-side dry runs of docs/examples/sandbox-pod-labelled.yaml in the agents namespace,
// through the pod webhook and the governed-pods check, both failurePolicy Fail) until the
// rollout is complete and the old pods are gone. It logs the creates attempted, the creates
// refused and the longest a create waited, on one line starting "manager rollout:", and fails
// if any create was refused or admitted without the injection.
func testManagerRollout(ctx context.Context, t *testing.T, env *localenv.Env) {
	b, err := os.ReadFile(filepath.Join(env.Root, "docs", "examples", "sandbox-pod-labelled.yaml"))
	must(t, err)
	pod := &corev1.Pod{}
	must(t, yaml.UnmarshalStrict(b, pod))
	pod.Name, pod.Namespace = "rollout-probe", ns
	pod.Spec.Containers[0].Image = localenv.TestbedImage

	// A client of its own, not rate-limited on the client side (client-go's default is 5
	// requests per second), so a create's wait is the API server's and the webhooks'.
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	must(t, err)
	cfg.QPS = -1
	cfg.Timeout = time.Minute
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	must(t, err)

	key := types.NamespacedName{Namespace: localenv.OperatorNamespace, Name: "gate-operator"}
	dep := &appsv1.Deployment{}
	must(t, c.Get(ctx, key, dep))
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 || dep.Status.ReadyReplicas != 2 {
		t.Fatalf("the manager Deployment has %v replicas, %d ready; the chart's default is 2", dep.Spec.Replicas, dep.Status.ReadyReplicas)
	}
	before := managerPods(ctx, t, c, dep, false)
	// One create through the webhooks before the rollout: the probe itself is admitted.
	if err := admitGoverned(ctx, c, pod); err != nil {
		t.Fatalf("a governed create before the rollout: %v", err)
	}

	var (
		mu        sync.Mutex
		attempted int
		refused   []string
		longest   time.Duration
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	// Two loops, so that creates overlap and reach both replicas while one of them stops.
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				t0 := time.Now()
				err := admitGoverned(ctx, c, pod)
				took := time.Since(t0)
				mu.Lock()
				attempted++
				longest = max(longest, took)
				if err != nil {
					refused = append(refused, fmt.Sprintf("at %s (waited %s): %v", t0.Sub(start).Round(100*time.Millisecond), took.Round(time.Millisecond), err))
				}
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	finish := func() {
		close(stop)
		wg.Wait()
	}

	if _, err := env.Kubectl(ctx, "", "-n", localenv.OperatorNamespace, "rollout", "restart", "deployment/gate-operator"); err != nil {
		finish()
		t.Fatal(err)
	}
	_, err = env.Kubectl(ctx, "", "-n", localenv.OperatorNamespace, "rollout", "status", "deployment/gate-operator", "--timeout=5m")
	rolled := time.Since(start)
	if err == nil {
		// The old pods are gone once they have drained and stopped; keep creating until then.
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) && slices.ContainsFunc(managerPods(ctx, t, c, dep, true), func(name string) bool { return slices.Contains(before, name) }) {
			time.Sleep(time.Second)
		}
		time.Sleep(rolloutSettle)
	}
	finish()
	if err != nil {
		t.Fatalf("the rollout did not complete: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	t.Logf("manager rollout: %d governed creates attempted, %d refused, longest wait %s; rollout complete after %s, creates for %s",
		attempted, len(refused), longest.Round(time.Millisecond), rolled.Round(time.Second), time.Since(start).Round(time.Second))
	if attempted < 20 {
		t.Errorf("only %d creates during the rollout", attempted)
	}
	if len(refused) > 0 {
		t.Errorf("%d of %d governed creates were refused during the manager rollout:\n%s", len(refused), attempted, strings.Join(refused[:min(len(refused), 20)], "\n"))
	}
	after := managerPods(ctx, t, c, dep, false)
	if len(after) != 2 || slices.ContainsFunc(after, func(name string) bool { return slices.Contains(before, name) }) {
		t.Errorf("manager pods %v after the rollout, %v before: want two new ones", after, before)
	}
}

// admitGoverned creates pod with a server-side dry run and checks that the pod webhook
// injected it.
func admitGoverned(ctx context.Context, c client.Client, pod *corev1.Pod) error {
	q := pod.DeepCopy()
	if err := c.Create(ctx, q, client.DryRunAll); err != nil {
		return err
	}
	if !slices.ContainsFunc(q.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == webhook.InstallContainerName }) {
		return fmt.Errorf("admitted without the injection (init containers %d)", len(q.Spec.InitContainers))
	}
	return nil
}

// managerPods names the manager Deployment's pods, with the ones being deleted if deleting.
func managerPods(ctx context.Context, t *testing.T, c client.Client, dep *appsv1.Deployment, deleting bool) []string {
	t.Helper()
	var pods corev1.PodList
	must(t, c.List(ctx, &pods, client.InNamespace(dep.Namespace), client.MatchingLabels(dep.Spec.Selector.MatchLabels)))
	var names []string
	for _, p := range pods.Items {
		if deleting || p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	return names
}
