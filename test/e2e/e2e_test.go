// Package e2e runs gate-operator where users run it, on the local cluster with a real node:
// installed by its Helm chart from the local images, the confirmer Deployment's pods answering
// the fake Managed Agents API (itself a pod) through the in-cluster Service, a sandbox pod
// governed by the bootstrap ConfigMap and its egress NetworkPolicy, and everything removed
// afterwards. It needs root (the node creates a bridge, mounts, nftables rules and cgroups).
package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/promscrape"
	"github.com/intutic/gate-operator/internal/testutil"
)

const ns = "agents"

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestEndToEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the e2e test runs a real node and needs root (CI runs as root)")
	}
	ctx := testutil.Context(t, 20*time.Minute)
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	ipForward, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	must(t, err)
	env, err := localenv.Start(ctx, root, logWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	pids := clusterPIDs(t, env.ClusterDir())
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			env.Stop()
		}
	}
	defer stop()

	installByUpgrade(ctx, t, env, slices.Concat(certValues, platformValues))
	const key = "sk-ant-e2e"
	must(t, env.DeployFakes(ctx, key))
	ids, err := env.FakeSession(ctx, "sesn_e2e", "agent_e2e",
		anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "rm -rf /"}, Permission: "ask"},
		anthropictest.ToolUse{Name: "read", Input: map[string]any{"file_path": "README.md"}, Permission: "ask"},
	)
	must(t, err)
	// Its agent asks before every call, as its events say, so the posture Report passes it.
	must(t, env.FakeAgent(ctx, anthropictest.Agent{ID: "agent_e2e", Tools: []anthropictest.Toolset{{Default: "always_ask"}}}))

	c := env.Client
	must(t, env.ApplySamples(ctx, localenv.Samples{Namespace: ns, APIKey: key, WebhookKey: "whsec_ZTJlIHdlYmhvb2sga2V5", BaseURL: localenv.FakeBaseURL, AgentID: "agent_e2e", PollInterval: 2 * time.Second, Deadline: approvalDeadline}))
	policy := &gatev1.HarnessAgentPolicy{}
	policyKey := types.NamespacedName{Namespace: ns, Name: "coding-agents"}
	wait(t, "the policy is Ready", func() bool {
		return c.Get(ctx, policyKey, policy) == nil && meta.IsStatusConditionTrue(policy.Status.Conditions, gatev1.ConditionReady)
	})

	// The SessionConfirmer's Deployment runs: two real pods, Available.
	d := &appsv1.Deployment{}
	wait(t, "the confirmer Deployment has 2 available replicas", func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "coding-agents-confirmer"}, d) == nil && d.Status.AvailableReplicas == 2
	})

	// The blocked call's deny_message reaches the fake through the in-cluster Service; the
	// allowed one is allowed.
	var confirmations []map[string]any
	wait(t, "both calls are confirmed", func() bool {
		confirmations, err = env.FakeConfirmations(ctx, "sesn_e2e")
		return err == nil && len(confirmations) == 2
	})
	for _, e := range confirmations {
		switch e["tool_use_id"] {
		case ids[0]:
			if e["result"] != "deny" || e["deny_message"] != "[Intutic Governance] BLOCKED: destructive command on the root filesystem" {
				t.Fatalf("the blocked call: %v", e)
			}
		case ids[1]:
			if e["result"] != "allow" {
				t.Fatalf("the allowed call: %v", e)
			}
		}
	}

	// A sandbox pod from docs/examples: its hook blocks and allows inside the pod, and its
	// egress is what the NetworkPolicy says, on real packets.
	sandbox, err := env.ApplySandbox(ctx, ns)
	must(t, err)
	hook := func(tool, input string) (string, int) {
		out, code, err := env.Hook(ctx, ns, sandbox, "agent", tool, input)
		must(t, err)
		return out, code
	}
	if out, code := hook("Bash", `{"command":"rm -rf /"}`); code != 2 || !strings.Contains(out, `"permissionDecision":"deny"`) {
		t.Errorf("a blocked Bash in the sandbox pod: exit %d, %s", code, out)
	}
	if out, code := hook("Read", `{"file_path":"/workspace/README.md"}`); code != 0 {
		t.Errorf("an allowed Read in the sandbox pod: exit %d, %s", code, out)
	}
	probe, err := env.Probe(ctx, ns, sandbox, "agent", "api.anthropic.com:443", "api.anthropic.com:80", "unlisted.example.org:443", localenv.KubernetesService)
	must(t, err)
	want := map[string]string{"api.anthropic.com:443": "open", "api.anthropic.com:80": "blocked", "unlisted.example.org:443": "blocked", localenv.KubernetesService: "blocked"}
	for dst, state := range want {
		t.Logf("egress of %s to %s: %s", sandbox, dst, probe[dst])
		if probe[dst] != state {
			t.Errorf("egress of the sandbox pod to %s: %s, want %s", dst, probe[dst], state)
		}
	}

	t.Run("installed from the registry", func(t *testing.T) { testRegistryInstall(ctx, t, env) })
	t.Run("gate-agent sidecar", func(t *testing.T) { testGateAgentInPod(ctx, t, env, sandbox) })
	t.Run("decision trail", func(t *testing.T) { testDecisionTrail(ctx, t, env, sandbox, "sesn_e2e") })
	t.Run("posture report", func(t *testing.T) { testPostureReport(ctx, t, env) })
	t.Run("cluster baseline", func(t *testing.T) { testClusterBaseline(ctx, t, env, sandbox) })
	t.Run("egress table", func(t *testing.T) { testEgressTable(ctx, t, env) })
	t.Run("no ungoverned first second", func(t *testing.T) { testStartupWindow(ctx, t, env) })
	t.Run("admission", func(t *testing.T) { testAdmission(ctx, t, env) })
	t.Run("human approvals", func(t *testing.T) { testApprovals(ctx, t, env) })
	t.Run("webhook certificate rotation", func(t *testing.T) { testCertRotation(ctx, t, env) })
	t.Run("platform layout", func(t *testing.T) { testPlatformLayout(ctx, t, env) })
	t.Run("children writable only by the manager", func(t *testing.T) { testChildrenWritableOnlyByTheManager(ctx, t, env) })
	t.Run("manager rollout", func(t *testing.T) { testManagerRollout(ctx, t, env) })

	// A policy edit reaches the running confirmer pods through kubelet's ConfigMap update:
	// every pod's metrics name the new snapshot digest in force, without a restart.
	before := policy.Status.SnapshotDigest
	for _, ip := range podIPs(t, c, d) {
		if got := readyDigest(ip); got != before {
			t.Fatalf("confirmer pod %s reports digest %q, want the policy's %s", ip, got, before)
		}
	}
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, policyKey, policy); err != nil {
			return err
		}
		policy.Spec.Rules[0].Reason = "no deleting the root filesystem"
		return c.Update(ctx, policy)
	}))
	var after string
	wait(t, "the policy publishes a new snapshot", func() bool {
		if c.Get(ctx, policyKey, policy) != nil {
			return false
		}
		after = policy.Status.SnapshotDigest
		return after != before && policy.Status.ObservedGeneration == policy.Generation
	})
	start := time.Now()
	for _, ip := range podIPs(t, c, d) {
		testutil.Eventually(t, 3*time.Minute, func() error {
			if got := readyDigest(ip); got != after {
				return fmt.Errorf("confirmer pod %s reports digest %q, want %s", ip, got, after)
			}
			return nil
		})
	}
	t.Logf("the new snapshot reached both confirmer pods %s after the policy's status named it", time.Since(start).Round(time.Second))
	if restarts := restartCount(t, c, d); restarts != 0 {
		t.Errorf("the confirmer pods restarted %d times; the snapshot should arrive without a restart", restarts)
	}
	t.Run("gate-agent fallback", func(t *testing.T) {
		testGateAgentFallback(ctx, t, env, sandbox, "no deleting the root filesystem")
	})
	t.Run("dashboard and alerts read served metrics", func(t *testing.T) { testMonitoring(ctx, t, env, ns, sandbox) })

	// Deleting the policy garbage-collects its children (kube-controller-manager).
	must(t, c.Delete(ctx, policy))
	wait(t, "the children are garbage-collected", func() bool {
		cmErr := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "coding-agents-bootstrap"}, &corev1.ConfigMap{})
		npErr := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "coding-agents-egress"}, &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(cmErr) && apierrors.IsNotFound(npErr)
	})
	wait(t, "the SessionConfirmer reports the missing policy", func() bool {
		got := &gatev1.SessionConfirmer{}
		if c.Get(ctx, policyKey, got) != nil {
			return false
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionPolicyResolved)
		return cond != nil && cond.Reason == "PolicyNotFound"
	})

	// Nothing the cluster started is left running or mounted, and the machine is as before.
	stop()
	checkClean(t, env.ClusterDir(), pids, strings.TrimSpace(string(ipForward)))
}

// clusterPIDs reads the PIDs the cluster script recorded.
func clusterPIDs(t *testing.T, dir string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.pid"))
	must(t, err)
	pids := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		must(t, err)
		pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
	}
	if len(pids) < 8 {
		t.Fatalf("the cluster recorded %d PIDs (%v); want etcd, the control plane and the node's processes", len(pids), pids)
	}
	return pids
}

func checkClean(t *testing.T, dir string, pids map[string]int, ipForward string) {
	t.Helper()
	for name, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("%s (PID %d) still runs after stop", name, pid)
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	if strings.Contains(string(mounts), dir) {
		t.Errorf("mounts under %s remain after stop", dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s remains after stop", dir)
	}
	for _, check := range [][]string{{"ip", "link", "show", "gatebr0"}, {"ip", "link", "show", "gate-ext0"}, {"ip", "netns", "pids", "gate-ext"}, {"nft", "list", "table", "inet", "gate_local_guard"}, {"nft", "list", "table", "ip", "kube-proxy"}, {"iptables", "-S", "KUBE-ROUTER-FORWARD"}} {
		if err := exec.Command(check[0], check[1:]...).Run(); err == nil {
			t.Errorf("%s succeeds after stop: the node left it behind", strings.Join(check, " "))
		}
	}
	if b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); strings.TrimSpace(string(b)) != ipForward {
		t.Errorf("net.ipv4.ip_forward is %s after stop, was %s", strings.TrimSpace(string(b)), ipForward)
	}
	if m, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods"); len(m) > 0 {
		t.Errorf("kubelet cgroups remain after stop: %v", m)
	}
}

func podIPs(t *testing.T, c client.Client, d *appsv1.Deployment) []string {
	t.Helper()
	var pods corev1.PodList
	must(t, c.List(t.Context(), &pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)))
	var ips []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	if len(ips) != 2 {
		t.Fatalf("confirmer pod IPs %v; want 2", ips)
	}
	return ips
}

func restartCount(t *testing.T, c client.Client, d *appsv1.Deployment) int32 {
	t.Helper()
	var pods corev1.PodList
	must(t, c.List(t.Context(), &pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)))
	var n int32
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			n += s.RestartCount
		}
	}
	return n
}

// readyDigest is the snapshot digest a confirmer pod's metrics listener names in force (the
// host reaches pod IPs on the node's bridge); /readyz on the API port does not say it.
func readyDigest(ip string) string {
	m, err := promscrape.Scrape("http://" + ip + ":8081/metrics")
	if err != nil {
		return ""
	}
	for sample, v := range m {
		if d, ok := strings.CutPrefix(sample, `confirmer_snapshot_in_force{digest="`); ok && v == 1 {
			return strings.TrimSuffix(d, `"}`)
		}
	}
	return ""
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wait fails the test unless cond holds within two minutes; what names the awaited state.
func wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 2*time.Minute, func() error {
		if !cond() {
			return errors.New(what)
		}
		return nil
	})
}
