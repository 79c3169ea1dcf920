//go:build conformance

package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/webhook"
)

// decidedBySidecar passes when c passes and the pod's gate-agent sidecar wrote a record of a
// call of tool decided by rule: Claude Code's hook asked the sidecar, which decided.
func decidedBySidecar(ctx context.Context, env *localenv.Env, pod, tool, rule string, c check) check {
	return func(r claudeRun) (bool, string) {
		if ok, detail := c(r); !ok {
			return ok, detail
		}
		logs, err := env.Kubectl(ctx, "", "-n", podNamespace, "logs", pod, "-c", webhook.GateAgentContainerName)
		if err != nil {
			return false, err.Error()
		}
		for _, line := range strings.Split(logs, "\n") {
			var rec decisionlog.Record
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Surface == decisionlog.SurfaceHookSidecar && rec.Tool == tool && rec.Rule == rule {
				return true, ""
			}
		}
		return false, "the gate-agent sidecar has no record of the " + tool + " call decided by " + rule
	}
}

// fallbackLines counts the lines of the pod's fallback spool: the calls gate-hook decided
// because the sidecar did not answer.
func fallbackLines(ctx context.Context, env *localenv.Env, pod string) (int, error) {
	out, _, err := env.Exec(ctx, podNamespace, pod, "agent", "", "/bin/busybox", "sh", "-c", "cat /run/gate-fallback/fallback.ndjson 2>/dev/null | /bin/busybox wc -l")
	if err != nil {
		return 0, err
	}
	var n int
	if _, err := fmt.Sscan(strings.TrimSpace(out), &n); err != nil {
		return 0, fmt.Errorf("counting the fallback spool's lines: %q", out)
	}
	return n, nil
}

// stopSidecar kills the pod's gate-agent three times, each time once kubelet has restarted it
// (its restart count up, running), so that kubelet's restart back-off (10 s, then 20 s) keeps
// it stopped for the next call: there is then no sidecar to answer, as after a crash.
func stopSidecar(ctx context.Context, t *testing.T, env *localenv.Env, pod string) {
	t.Helper()
	restarts := int32(-1)
	for kill := range 3 {
		var s corev1.ContainerStatus
		err := localenv.Wait(ctx, time.Minute, func() (bool, error) {
			p := &corev1.Pod{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: podNamespace, Name: pod}, p); err != nil {
				return false, err
			}
			for _, st := range p.Status.InitContainerStatuses {
				if st.Name == webhook.GateAgentContainerName {
					s = st
				}
			}
			return s.State.Running != nil && s.RestartCount > restarts, nil
		})
		mustDo(t, err)
		mustDo(t, env.KillContainer(ctx, s.ContainerID))
		restarts = s.RestartCount
		t.Logf("killed gate-agent (%d of 3; restarts so far %d)", kill+1, s.RestartCount)
	}
}
