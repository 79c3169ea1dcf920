package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/testutil"
	"github.com/intutic/gate-operator/internal/webhook"
)

// agentRecords are the decision records in the log of the pod's running gate-agent.
func agentRecords(ctx context.Context, env *localenv.Env, pod string) ([]decisionlog.Record, error) {
	out, err := env.Kubectl(ctx, "", "-n", ns, "logs", pod, "-c", webhook.GateAgentContainerName)
	if err != nil {
		return nil, err
	}
	var recs []decisionlog.Record
	for _, line := range strings.Split(out, "\n") {
		var r decisionlog.Record
		if json.Unmarshal([]byte(line), &r) == nil && r.Schema == decisionlog.Schema {
			recs = append(recs, r)
		}
	}
	return recs, nil
}

// gateAgentStatus is the status of the pod's gate-agent native sidecar and of its agent container.
func gateAgentStatus(ctx context.Context, t *testing.T, env *localenv.Env, pod string) (sidecar, agent corev1.ContainerStatus) {
	p := &corev1.Pod{}
	must(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: pod}, p))
	for _, s := range p.Status.InitContainerStatuses {
		if s.Name == webhook.GateAgentContainerName {
			sidecar = s
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == "agent" {
			agent = s
		}
	}
	return sidecar, agent
}

// testGateAgentInPod: the sandbox pod's gate-agent sidecar started and was ready before the
// agent; the hook's calls are decided by it and recorded in its log; the agent's user can
// neither replace its socket nor see its process.
func testGateAgentInPod(ctx context.Context, t *testing.T, env *localenv.Env, sandbox string) {
	sidecar, agent := gateAgentStatus(ctx, t, env, sandbox)
	if sidecar.State.Running == nil || sidecar.Started == nil || !*sidecar.Started || !sidecar.Ready {
		t.Fatalf("gate-agent is not running and ready: %+v", sidecar)
	}
	if agent.State.Running == nil || agent.State.Running.StartedAt.Before(&sidecar.State.Running.StartedAt) {
		t.Errorf("the agent started at %v, before gate-agent (%v)", agent.State.Running, sidecar.State.Running.StartedAt)
	}

	out, code, err := env.Hook(ctx, ns, sandbox, "agent", "Bash", `{"command":"rm -rf /"}`)
	must(t, err)
	if code != 2 || !strings.Contains(out, `"permissionDecision":"deny"`) {
		t.Fatalf("a blocked Bash through the sidecar: exit %d, %s", code, out)
	}
	wait(t, "gate-agent's log records the Block", func() bool {
		recs, err := agentRecords(ctx, env, sandbox)
		if err != nil {
			return false
		}
		for _, r := range recs {
			if r.Surface == decisionlog.SurfaceHookSidecar && r.ReportedBy == "gate-agent" && r.Rule == "no-root-rm" && r.Tool == "Bash" && r.Pod == sandbox {
				return true
			}
		}
		return false
	})

	// What the agent's user cannot do: write the socket's directory (mounted read-only), or
	// see the sidecar's process (no shared process namespace) to signal it or read its memory.
	for _, cmd := range []string{"rm -f /run/gate-agent/gate.sock", ": > /run/gate-agent/gate.sock.new", "ln -sf /tmp/x /run/gate-agent/gate.sock"} {
		if _, code, err := env.Exec(ctx, ns, sandbox, "agent", "", "/bin/sh", "-c", cmd); err != nil || code == 0 {
			t.Errorf("the agent's user ran %q: exit %d, %v", cmd, code, err)
		}
	}
	if _, code, err := env.Exec(ctx, ns, sandbox, "agent", "", "/bin/sh", "-c", "test -S /run/gate-agent/gate.sock"); err != nil || code != 0 {
		t.Errorf("the socket is not there for the agent: exit %d, %v", code, err)
	}
	// The processes the agent's container can see, by the name of their program.
	comms, _, err := env.Exec(ctx, ns, sandbox, "agent", "", "/bin/sh", "-c", "cat /proc/[0-9]*/comm")
	must(t, err)
	if slices.Contains(strings.Fields(comms), webhook.GateAgentContainerName) {
		t.Errorf("the agent sees gate-agent's process among %q", strings.Fields(comms))
	}
}

// testGateAgentFallback, after a policy edit whose Block reason is reason: the edit reached the
// running sidecar without a restart; killed, the sidecar leaves every call decided (by
// gate-hook, which spools what it decided), comes back, and reports those calls as the hook's.
func testGateAgentFallback(ctx context.Context, t *testing.T, env *localenv.Env, sandbox, reason string) {
	bash := func() (string, int) {
		out, code, err := env.Hook(ctx, ns, sandbox, "agent", "Bash", `{"command":"rm -rf /"}`)
		must(t, err)
		return out, code
	}
	testutil.Eventually(t, 3*time.Minute, func() error {
		recs, err := agentRecords(ctx, env, sandbox)
		if err != nil {
			return err
		}
		if out, code := bash(); code != 2 || !strings.Contains(out, reason) {
			return fmt.Errorf("the hook answers exit %d, %s", code, out)
		}
		for _, r := range recs {
			if r.Surface == decisionlog.SurfaceHookSidecar && r.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no record of gate-agent names the edited reason %q", reason)
	})
	sidecar, _ := gateAgentStatus(ctx, t, env, sandbox)
	if sidecar.RestartCount != 0 {
		t.Errorf("gate-agent restarted %d times; the edit should arrive without a restart", sidecar.RestartCount)
	}

	spooled := func() int {
		out, _, err := env.Exec(ctx, ns, sandbox, "agent", "", "/bin/sh", "-c", "cat /run/gate-fallback/fallback.ndjson 2>/dev/null | wc -l")
		must(t, err)
		var n int
		_, _ = fmt.Sscan(strings.TrimSpace(out), &n)
		return n
	}
	before := spooled()
	// kubelet may have the sidecar back before the next call; killed again, it waits out its
	// restart back-off (10 s), so a call meets no sidecar.
	calls, kills, restarts := 0, 0, int32(-1)
	for kills < 3 && spooled() == before {
		// The sidecar as kubelet last restarted it: after a kill, its status says running
		// until kubelet has seen the exit.
		var s corev1.ContainerStatus
		wait(t, "gate-agent is running again", func() bool {
			s, _ = gateAgentStatus(ctx, t, env, sandbox)
			return s.State.Running != nil && s.RestartCount > restarts
		})
		must(t, env.KillContainer(ctx, s.ContainerID))
		kills, restarts = kills+1, s.RestartCount
		// Whoever answers, each call is decided as the policy says.
		for range 5 {
			calls++
			if out, code := bash(); code != 2 || !strings.Contains(out, reason) {
				t.Fatalf("a call after gate-agent was killed: exit %d, %s", code, out)
			}
		}
	}
	if spooled() == before {
		t.Fatalf("%d calls after %d kills, none decided by gate-hook's fallback", calls, kills)
	}
	t.Logf("gate-agent: killed %d times; of %d calls decided meanwhile, %d by gate-hook's fallback", kills, calls, spooled()-before)
	wait(t, "gate-agent is restarted and ready", func() bool {
		s, _ := gateAgentStatus(ctx, t, env, sandbox)
		return s.RestartCount >= int32(kills) && s.Ready
	})
	wait(t, "the restarted gate-agent reports the fallback decision as the hook's", func() bool {
		recs, err := agentRecords(ctx, env, sandbox)
		if err != nil {
			return false
		}
		for _, r := range recs {
			if r.Surface == decisionlog.SurfaceHookFallback && r.ReportedBy == "hook" && r.Verdict != "" {
				return true
			}
		}
		return false
	})
	if out, code := bash(); code != 2 || !strings.Contains(out, reason) {
		t.Errorf("a call once gate-agent is back: exit %d, %s", code, out)
	}
}
