//go:build conformance

package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/anthropic/messagestest"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/decisionlog/decisionlogtest"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/testutil"
	"github.com/intutic/gate-operator/internal/webhook"
)

const (
	podNamespace = "agents"
	// agentHome is the home of the claude-agent image's user (uid 1000, as in the example).
	agentHome = "/home/agent"
	// podSnapshot is where the agent container reads the policy snapshot kubelet delivers.
	podSnapshot = "/opt/intutic/hooks/" + gate.SnapshotFileName
)

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestClaudeCodeInPod runs the pinned Claude Code inside a sandbox pod on the local node, as
// docs/examples/sandbox-pod.yaml has it (gate-hook installed by an init container, the wait for
// the egress policy, the bootstrap ConfigMap mounted whole, managed-settings.json at
// /etc/claude-code, uid 1000, a read-only root filesystem with writable volumes only for HOME,
// /workspace and /tmp), with the sample policy whose egress allows only the Messages API
// stand-in's pod address and port. The stand-in runs as another pod; the cases drive Claude
// Code with kubectl exec exactly as runClaude does on the host. It needs root (the node) and
// starts and stops the node itself.
func TestClaudeCodeInPod(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("Claude Code in a pod runs the local node and needs root")
	}
	claude := claudeBinary(t)
	if _, err := os.Stat(claude); err != nil {
		t.Fatalf("the pinned Claude Code binary (npm ci installs it): %v", err)
	}
	// End before go test's own deadline, which would panic and leave the node running.
	timeout := 40 * time.Minute
	if d, ok := t.Deadline(); ok {
		timeout = time.Until(d) - time.Minute
	}
	ctx := testutil.Context(t, timeout)
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	env, err := localenv.Start(ctx, root, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	mustDo(t, env.InstallChart(ctx))
	mustDo(t, env.ImportClaudeAgent(ctx, localenv.AgentCLIs{Claude: claude, Codex: codexBinary(t), Gemini: filepath.Dir(filepath.Dir(geminiJS(t)))}))
	standIn, err := env.DeployMessagesStandIn(ctx)
	mustDo(t, err)

	// The sample policy, its egress narrowed to the stand-in: the pod's address and port, since
	// NetworkPolicies see a Service's traffic after kube-proxy has translated it.
	env.Step("applying the sample HarnessAgentPolicy, egress only to the stand-in %s:8080", standIn)
	c := env.Client
	mustDo(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podNamespace}}))
	p := harnessSamplePolicy(t)
	p.Namespace = podNamespace
	p.Spec.Egress = gatev1.EgressSpec{AllowedCIDRs: []gatev1.CIDR{gatev1.CIDR(standIn + "/32")}, Ports: localenv.StandInPorts}
	mustDo(t, c.Create(ctx, p))
	policyKey := types.NamespacedName{Namespace: podNamespace, Name: p.Name}
	policy := waitPolicy(ctx, t, env, policyKey, 1)

	env.Step("starting the sandbox pods (docs/examples/sandbox-pod.yaml with Claude Code; one whose hook files each case breaks)")
	governed := applyClaudePod(ctx, t, env, "coding-agent-0", nil)
	faults := applyClaudePod(ctx, t, env, "coding-agent-faults", faultPod)
	before := &corev1.Pod{}
	mustDo(t, c.Get(ctx, types.NamespacedName{Namespace: podNamespace, Name: governed}, before))

	// The agent reaches its model API, through the Service and at the pod, and nothing else.
	messages := strings.TrimPrefix(localenv.MessagesURL, "http://") + ":80"
	egress := map[string]string{
		messages:                          "open",
		net.JoinHostPort(standIn, "8080"): "open",
		"198.18.40.10:443":                "blocked", // api.anthropic.com's stand-in, outside the cluster
		localenv.KubernetesService:        "blocked",
	}
	got, err := env.Probe(ctx, podNamespace, governed, "agent", slices.Sorted(maps.Keys(egress))...)
	mustDo(t, err)
	var wrong []string
	for _, dst := range slices.Sorted(maps.Keys(egress)) {
		t.Logf("egress of %s to %s: %s", governed, dst, got[dst])
		if got[dst] != egress[dst] {
			wrong = append(wrong, fmt.Sprintf("%s %s, want %s", dst, got[dst], egress[dst]))
		}
	}
	record(t, claudePkg, "in a pod: egress reaches the stand-in (Service and pod) and nothing else", len(wrong) == 0, strings.Join(wrong, "; "))
	if len(wrong) > 0 {
		t.FailNow() // every case needs the model API
	}

	// Claude Code's hook asks the pod's gate-agent sidecar (docs/gate-agent.md); the first case
	// checks that it decided, the one with the sidecar stopped that gate-hook did.
	var spooled int
	cases := []podCase{
		{name: "a blocked Bash command is refused and does not run", pod: governed, tool: "Bash",
			input:  map[string]any{"command": "rm -rf /nonexistent-gate-conformance; touch /workspace/blocked"},
			marker: "/workspace/blocked",
			check:  decidedBySidecar(ctx, env, governed, "Bash", "no-root-rm", blockedWith("destructive command on the root filesystem"))},
		{name: "with its gate-agent sidecar stopped, a blocked Bash command is refused by gate-hook", pod: governed, tool: "Bash",
			input:  map[string]any{"command": "rm -rf /nonexistent-gate-conformance; touch /workspace/blocked-without-sidecar"},
			marker: "/workspace/blocked-without-sidecar",
			setup: func(t *testing.T) {
				var err error
				spooled, err = fallbackLines(ctx, env, governed)
				mustDo(t, err)
				stopSidecar(ctx, t, env, governed)
			},
			check: func(r claudeRun) (bool, string) {
				if ok, detail := blockedWith("destructive command on the root filesystem")(r); !ok {
					return ok, detail
				}
				n, err := fallbackLines(ctx, env, governed)
				if err != nil {
					return false, err.Error()
				}
				if n <= spooled {
					return false, fmt.Sprintf("the fallback spool has %d lines, as before the call: the sidecar answered it", n)
				}
				return true, ""
			}},
		{name: "an allowed Bash command runs", pod: governed, tool: "Bash",
			input:  map[string]any{"command": "touch /workspace/allowed"},
			marker: "/workspace/allowed",
			check:  ran("the allowed command")},
		// HOME is writable: only the gate stands between the agent and the file.
		{name: "a Write outside the workspace is refused", pod: governed, tool: "Write",
			input:  map[string]any{"file_path": agentHome + "/outside", "content": "x"},
			marker: agentHome + "/outside",
			check:  blockedWith("agents write only inside /workspace")},
		{name: "after a policy edit, the call meets the new rules (no pod restart)", pod: governed, tool: "Bash",
			input:  map[string]any{"command": "touch /workspace/after-edit"},
			marker: "/workspace/after-edit",
			setup: func(t *testing.T) {
				editPolicy(ctx, t, env, policyKey, policy, governed)
			},
			check: func(r claudeRun) (bool, string) {
				if ok, detail := blockedWith("touch is not allowed since the policy edit")(r); !ok {
					return ok, detail
				}
				after := &corev1.Pod{}
				if err := c.Get(ctx, types.NamespacedName{Namespace: podNamespace, Name: governed}, after); err != nil {
					return false, err.Error()
				}
				if after.UID != before.UID || restarts(after) != 0 {
					return false, fmt.Sprintf("the pod was replaced or restarted (uid %s -> %s, restarts %d)", before.UID, after.UID, restarts(after))
				}
				return true, ""
			}},
	}
	// The registration fails closed in a pod too. In the fault pod each case leaves the wrapper
	// or /usr/bin/env as a fault would, and the call does not run; the intact copy proves the
	// fixture (there the allowed call runs). They run before the policy edit, the last case,
	// which blocks touch from then on.
	noAnswer := blockedWith("the gate-hook wrapper gave no decided answer")
	var faultCases []podCase
	for _, f := range []struct {
		name, marker, fault string
		check               check
	}{
		{name: "with an intact copy of the bundle, an allowed Bash command runs", marker: "intact", check: ran("the allowed command")},
		{name: "a missing hook wrapper blocks", marker: "missing", fault: "rm " + faultHooks + "/gate-hook.sh", check: noAnswer},
		{name: "an empty hook wrapper blocks", marker: "empty", fault: ": > " + faultHooks + "/gate-hook.sh", check: noAnswer},
		{name: "an unreadable hook wrapper blocks", marker: "unreadable", fault: "chmod 000 " + faultHooks + "/gate-hook.sh", check: noAnswer},
		{name: "a garbage hook wrapper blocks", marker: "garbage", fault: `printf '\177ELF ((( esac' > ` + faultHooks + "/gate-hook.sh", check: noAnswer},
		{name: "an agent image without /usr/bin/env blocks", marker: "noenv", fault: "rm /usr/bin/env", check: noAnswer},
		{name: "a missing gate-hook binary blocks", marker: "nohook", fault: "rm " + faultBin + "/gate-hook", check: blockedWith("the gate-hook binary is missing")},
	} {
		marker := "/workspace/fault-" + f.marker
		faultCases = append(faultCases, podCase{name: f.name, pod: faults, tool: "Bash", input: map[string]any{"command": "touch " + marker}, marker: marker,
			setup: func(t *testing.T) { breakFaultPod(ctx, t, env, faults, f.fault) }, check: f.check})
	}
	// Under a cluster baseline and an exception, before the policy edit (which blocks touch).
	fleet, removeFleet := fleetCases(ctx, t, env, governed)
	defer removeFleet()
	t.Logf("fleet cases: %s", fleetNames(fleet))
	edit := cases[len(cases)-1]
	cases = append(append(cases[:len(cases)-1], faultCases...), fleet...)
	run := func(tc podCase) {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup(t)
			}
			mustDo(t, env.MessagesScript(ctx, messagestest.Script{Tool: tc.tool, Input: tc.input}))
			r := runClaudeInPod(ctx, t, env, tc.pod, "--allowedTools", tc.tool)
			_, code, err := env.Exec(ctx, podNamespace, tc.pod, "agent", "", "/bin/test", "-e", tc.marker)
			mustDo(t, err)
			r.marker = code == 0
			ok, detail := tc.check(r)
			record(t, claudePkg, "in a pod: "+tc.name, ok, detail)
		})
	}
	for _, tc := range cases {
		run(tc)
	}
	// The cluster baseline selects every pod of the namespace, and would govern the
	// SessionConfirmer's pods too, its egress cutting them off from the API server: it goes
	// before the confirmer comes (docs/fleet.md, "Confirmers under a baseline").
	removeFleet()
	decisionTrailInPod(ctx, t, env, governed)
	// The human lane needs the SessionConfirmer decisionTrailInPod applied.
	humanLaneInPod(ctx, t, env, policyKey)
	// Codex and Gemini CLI under the same policy, before the edit (which blocks touch).
	otherAgentsInPod(ctx, t, env)
	run(edit)
}

// podCase is one case of TestClaudeCodeInPod.
type podCase struct {
	name, pod, tool string
	input           map[string]any
	marker          string
	setup           func(t *testing.T) // before Claude Code runs
	check           check
}

// runClaudeInPod runs Claude Code in the pod's agent container as runClaude does on the host:
// print mode, JSON out, a clean environment whose model API is the stand-in, the working
// directory the workspace (the container's workingDir).
func runClaudeInPod(ctx context.Context, t *testing.T, env *localenv.Env, pod string, extra ...string) claudeRun {
	t.Helper()
	return runClaudeInPodWith(ctx, t, env, pod, claudeArgs(extra...))
}

// runClaudeInPodWith is runClaudeInPod with Claude Code's whole argument list.
func runClaudeInPodWith(ctx context.Context, t *testing.T, env *localenv.Env, pod string, args []string) claudeRun {
	t.Helper()
	// busybox's env, not /usr/bin/env: one case removes that.
	command := append(append([]string{"/bin/busybox", "env", "-i"}, claudeEnv("/usr/local/bin:/usr/bin:/bin", agentHome, localenv.MessagesURL)...), "/usr/local/bin/claude")
	// A run takes about a second; without its model API Claude Code retries for minutes.
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	stdout, code, err := env.Exec(runCtx, podNamespace, pod, "agent", "", append(command, args...)...)
	mustDo(t, err)
	if code != 0 {
		t.Logf("claude exited with status %d", code)
	}
	r := parseClaudeRun(t, stdout, "")
	r.result, err = env.MessagesToolResult(ctx)
	mustDo(t, err)
	return r
}

// applyClaudePod starts a pod from docs/examples/sandbox-pod.yaml with the claude-agent image.
// The example's agent container gets what Claude Code needs besides it: a read-only root
// filesystem with writable emptyDirs for HOME, /workspace (its working directory) and /tmp
// (Claude Code exits at start when it cannot create /tmp/claude-<uid>). edit, unless nil,
// changes the pod further before it is applied.
func applyClaudePod(ctx context.Context, t *testing.T, env *localenv.Env, name string, edit func(pod *corev1.Pod, agent *corev1.Container)) string {
	t.Helper()
	manifest, err := env.SandboxManifest(localenv.ClaudeAgentImage)
	mustDo(t, err)
	pod := &corev1.Pod{}
	mustDo(t, yaml.UnmarshalStrict([]byte(manifest), pod))
	pod.Name, pod.Namespace = name, podNamespace
	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == "agent" })
	if i < 0 {
		t.Fatal("docs/examples/sandbox-pod.yaml has no container named agent")
	}
	agent := &pod.Spec.Containers[i]
	agent.ImagePullPolicy = corev1.PullNever
	agent.WorkingDir = "/workspace"
	if agent.SecurityContext == nil {
		agent.SecurityContext = &corev1.SecurityContext{}
	}
	readOnly := true
	agent.SecurityContext.ReadOnlyRootFilesystem = &readOnly
	addEmptyDirs(pod, agent, map[string]string{"home": agentHome, "workspace": "/workspace", "tmp": "/tmp"})
	if edit != nil {
		edit(pod, agent)
	}
	b, err := yaml.Marshal(pod)
	mustDo(t, err)
	got, err := env.ApplyPod(ctx, podNamespace, string(b))
	mustDo(t, err)
	return got
}

// addEmptyDirs adds an emptyDir volume per name, mounted in c at its path.
func addEmptyDirs(pod *corev1.Pod, c *corev1.Container, mounts map[string]string) {
	for _, vol := range slices.Sorted(maps.Keys(mounts)) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: mounts[vol]})
	}
}

// faultHooks and faultBin are where the fault pod's agent container has the hook directory and
// the gate-hook binary's: emptyDirs the test fills from the bundle and the installed binary
// (breakFaultPod), so that each case can leave the wrapper or the binary as a fault would. A
// governed pod mounts the bundle and the binary read-only there; the fault pod's agent container
// is left out of the injection (AnnotationSkipContainers) and mounts them at faultBundle and
// faultInstalled instead (the gate-bin volume read-only, as every container but
// install-gate-hook must).
const (
	faultHooks     = "/opt/intutic/hooks"
	faultBundle    = "/opt/intutic/bundle"
	faultBin       = "/opt/intutic/bin"
	faultInstalled = "/opt/intutic/installed"
)

// faultPod is the fault pod's edit: the agent container skipped by the injection, the bundle
// at faultBundle and the installed binary at faultInstalled, emptyDirs at faultHooks, faultBin
// and /usr/bin (the image's /usr/bin holds only env, which breakFaultPod puts back or leaves
// out).
func faultPod(pod *corev1.Pod, agent *corev1.Container) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[webhook.AnnotationSkipContainers] = agent.Name
	for i, m := range agent.VolumeMounts {
		switch m.Name {
		case webhook.VolumeHooks:
			agent.VolumeMounts[i].MountPath = faultBundle
		case webhook.VolumeBin:
			agent.VolumeMounts[i].MountPath = faultInstalled
		}
	}
	addEmptyDirs(pod, agent, map[string]string{"faulty-hooks": faultHooks, "faulty-bin": faultBin, "usr-bin": "/usr/bin"})
}

// breakFaultPod fills the fault pod's hook directory with a copy of the bundle and its binary
// directory with what install-gate-hook installed (gate-hook and gate-hook-cel), puts
// /usr/bin/env back, and then runs fault (a busybox sh command; "" leaves both intact). The
// directory is root's (an emptyDir), so nothing here changes its own mode; rm removes a mode 000
// file the agent's user cannot read.
func breakFaultPod(ctx context.Context, t *testing.T, env *localenv.Env, pod, fault string) {
	t.Helper()
	script := "exec 2>&1; set -e; cd " + faultHooks + "; rm -rf ./* ; cp -RL " + faultBundle + "/* . ; rm -rf " + faultBin + "/*; cp " + faultInstalled + "/* " + faultBin + "/; /bin/busybox ln -sf /bin/busybox /usr/bin/env"
	if fault != "" {
		script += "; " + fault
	}
	out, code, err := env.Exec(ctx, podNamespace, pod, "agent", "", "/bin/busybox", "sh", "-c", script)
	mustDo(t, err)
	if code != 0 {
		t.Fatalf("preparing the fault pod (%s): exit %d: %s", script, code, out)
	}
}

// waitPolicy waits until the policy has reconciled generation and is Ready.
func waitPolicy(ctx context.Context, t *testing.T, env *localenv.Env, key types.NamespacedName, generation int64) *gatev1.HarnessAgentPolicy {
	t.Helper()
	p := &gatev1.HarnessAgentPolicy{}
	err := localenv.Wait(ctx, 2*time.Minute, func() (bool, error) {
		if err := env.Client.Get(ctx, key, p); err != nil {
			return false, err
		}
		return p.Status.ObservedGeneration >= generation && meta.IsStatusConditionTrue(p.Status.Conditions, gatev1.ConditionReady), nil
	})
	if err != nil {
		t.Fatalf("policy %s Ready at generation %d: %v; conditions %+v", key, generation, err, p.Status.Conditions)
	}
	return p
}

// editPolicy adds a rule that blocks touch, waits until the policy publishes the new snapshot,
// and then until kubelet has delivered it into the running pod's volume.
func editPolicy(ctx context.Context, t *testing.T, env *localenv.Env, key types.NamespacedName, p *gatev1.HarnessAgentPolicy, pod string) {
	t.Helper()
	old := p.Status.SnapshotDigest
	p = &gatev1.HarnessAgentPolicy{}
	mustDo(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, key, p); err != nil {
			return err
		}
		p.Spec.Rules = append([]gatev1.Rule{{
			Name: "no-touch", When: `call.commands.exists(c, c.name == "touch")`,
			Action: gatev1.ActionBlock, Reason: "touch is not allowed since the policy edit", Code: "touch",
		}}, p.Spec.Rules...)
		return env.Client.Update(ctx, p)
	}))
	edited := waitPolicy(ctx, t, env, key, p.Generation)
	if edited.Status.SnapshotDigest == old {
		t.Fatalf("the edit left the snapshot digest at %s", old)
	}
	start := time.Now()
	var inPod string
	err := localenv.Wait(ctx, 2*time.Minute, func() (bool, error) {
		out, _, err := env.Exec(ctx, podNamespace, pod, "agent", "", "/bin/cat", podSnapshot)
		if err != nil {
			return false, err
		}
		var s struct{ Digest string }
		_ = json.Unmarshal([]byte(out), &s)
		inPod = s.Digest
		return inPod == edited.Status.SnapshotDigest, nil
	})
	if err != nil {
		t.Fatalf("kubelet did not deliver snapshot %s to %s (it has %s): %v", edited.Status.SnapshotDigest, pod, inPod, err)
	}
	t.Logf("kubelet delivered the new snapshot %s to the running pod %s in %s", inPod, pod, time.Since(start).Round(100*time.Millisecond))
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// decisionTrailInPod checks the decision trail where users read it: a SessionConfirmer in the
// pod's namespace answers a Managed Agents session (the fake API in the cluster), and
// `kubectl gate decisions -n agents -o json` then shows, merged in time order from the pods'
// logs, the Bash call the real Claude Code made in the governed pod and its sidecar blocked,
// and the Managed Agents call the confirmer blocked; every record it prints is admitted by the
// record's JSON Schema.
func decisionTrailInPod(ctx context.Context, t *testing.T, env *localenv.Env, governed string) {
	t.Run("kubectl gate decisions shows the hook's and the confirmer's blocks in time order", func(t *testing.T) {
		const key = "sk-ant-conformance"
		mustDo(t, env.DeployFakes(ctx, key))
		mustDo(t, env.ApplySessionConfirmer(ctx, localenv.Samples{Namespace: podNamespace, APIKey: key, WebhookKey: "whsec_ZTJlIHdlYmhvb2sga2V5",
			BaseURL: localenv.FakeBaseURL, AgentID: "agent_trail", PollInterval: 2 * time.Second}))
		ids, err := env.FakeSession(ctx, "sesn_trail", "agent_trail",
			anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "rm -rf /"}, Permission: "ask"})
		mustDo(t, err)
		mustDo(t, localenv.Wait(ctx, 3*time.Minute, func() (bool, error) {
			got, err := env.FakeConfirmations(ctx, "sesn_trail")
			return err == nil && len(got) == 1, nil
		}))
		var recs []decisionlog.Record
		var hook, confirmed int
		ok := localenv.Wait(ctx, time.Minute, func() (bool, error) {
			out, err := env.Gate(ctx, "decisions", "-n", podNamespace, "--since", "1h", "-o", "json")
			if err != nil {
				return false, nil
			}
			recs = decisionlogtest.ValidateLines(t, out)
			hook = slices.IndexFunc(recs, func(r decisionlog.Record) bool {
				return r.Surface == decisionlog.SurfaceHookSidecar && r.Runtime == "claude-code" && r.Pod == governed && r.Tool == "Bash" && r.Rule == "no-root-rm" && r.Verdict == "Block"
			})
			confirmed = slices.IndexFunc(recs, func(r decisionlog.Record) bool {
				return r.Surface == gate.SurfaceManagedAgents && r.Session == "sesn_trail" && r.ToolUseID == ids[0] && r.Rule == "no-root-rm" && r.Verdict == "Block"
			})
			return hook >= 0 && confirmed >= 0, nil
		}) == nil
		ordered := slices.IsSortedFunc(recs, func(a, b decisionlog.Record) int { return strings.Compare(a.Time, b.Time) })
		table, err := env.Gate(ctx, "decisions", "-n", podNamespace, "--since", "1h", "--verdict", "Block")
		mustDo(t, err)
		t.Logf("kubectl gate decisions -n %s --since 1h --verdict Block:\n%s", podNamespace, table)
		record(t, claudePkg, "in a pod: kubectl gate decisions shows the hook's block of Claude Code and the confirmer's block of a Managed Agents call, in time order",
			ok && ordered && hook < confirmed, fmt.Sprintf("%d records; the hook's block at %d, the confirmer's at %d; in time order %v", len(recs), hook, confirmed, ordered))
	})
}
