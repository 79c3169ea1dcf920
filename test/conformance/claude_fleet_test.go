//go:build conformance

package conformance

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/localenv"
)

// fleetReason is the refusal of the conformance baseline's rule.
const fleetReason = "the platform baseline forbids the baseline marker"

// fleetExceptionLife is how long the conformance exception lasts: long enough for kubelet to
// deliver it into the running pod (9 to 60 s on the local node), short enough to wait for.
const fleetExceptionLife = 90 * time.Second

// fleetCases are the cases of the real Claude Code in a pod governed by a cluster baseline, its
// namespace policy and an exception (docs/fleet.md): the baseline's Block holds against the
// namespace policy's Allow; an exception lifts exactly its rule (the namespace policy's own
// Block still holds); and at expiresAt the hook refuses again by its own clock. Each setup waits
// until the running pod's hook answers as the case needs, so the case runs Claude Code once.
// The returned function removes the cluster policy and the exception.
func fleetCases(ctx context.Context, t *testing.T, env *localenv.Env, pod string) ([]podCase, func()) {
	c := env.Client
	chap := &gatev1.ClusterHarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "conformance-baseline"},
		Spec: gatev1.ClusterHarnessAgentPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": podNamespace}},
			Rules: []gatev1.Rule{{Name: "no-baseline-marker", Tools: []string{"Bash"},
				When:   `call.commands.exists(c, c.args.exists(a, a.contains("baseline-marker")))`,
				Action: gatev1.ActionBlock, Reason: fleetReason, Code: "baseline_marker"}},
			Exceptions: &gatev1.ClusterExceptionPolicy{
				NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": podNamespace}},
				MaxDuration:       metav1.Duration{Duration: 10 * time.Minute},
			},
		},
	}
	gex := &gatev1.GateException{
		ObjectMeta: metav1.ObjectMeta{Namespace: podNamespace, Name: "conformance-lift-marker"},
		Spec: gatev1.GateExceptionSpec{
			PolicyRef: gatev1.ExceptionPolicyRef{Kind: gatev1.ExceptionOfClusterPolicy, Name: chap.Name},
			Rules:     []gatev1.RuleName{"no-baseline-marker"},
			Reason:    "conformance: the marker is needed for a minute", Ticket: "CONF-1",
		},
	}
	// probe is what the pod's hook answers for a Bash command with the marker: its exit status.
	probe := func(t *testing.T) int {
		t.Helper()
		input, _ := json.Marshal(map[string]string{"command": "touch /workspace/baseline-marker-probe"})
		_, code, err := env.Hook(ctx, podNamespace, pod, "agent", "Bash", string(input))
		mustDo(t, err)
		return code
	}
	waitHook := func(t *testing.T, what string, code int) {
		t.Helper()
		start := time.Now()
		mustDo(t, localenv.Wait(ctx, 2*time.Minute, func() (bool, error) { return probe(t) == code, nil }))
		t.Logf("%s after %s", what, time.Since(start).Round(100*time.Millisecond))
	}
	cases := []podCase{
		{name: "under a cluster baseline, its Block holds against the namespace policy's Allow", pod: pod, tool: "Bash",
			input: map[string]any{"command": "touch /workspace/baseline-marker-1"}, marker: "/workspace/baseline-marker-1",
			setup: func(t *testing.T) {
				mustDo(t, c.Create(ctx, chap))
				waitHook(t, "the cluster layer reached the running pod", 2)
			},
			check: blockedWith(fleetReason)},
		{name: "an exception lifts exactly its rule of the baseline", pod: pod, tool: "Bash",
			input: map[string]any{"command": "touch /workspace/baseline-marker-2"}, marker: "/workspace/baseline-marker-2",
			setup: func(t *testing.T) {
				gex.Spec.ExpiresAt = metav1.NewTime(time.Now().Add(fleetExceptionLife).Truncate(time.Second))
				mustDo(t, c.Create(ctx, gex))
				waitHook(t, "the exception reached the running pod", 0)
			},
			check: ran("the command the exception allows")},
		{name: "under the exception, the namespace policy's own Block still holds", pod: pod, tool: "Bash",
			input:  map[string]any{"command": "rm -rf /nonexistent-gate-conformance; touch /workspace/baseline-marker-3"},
			marker: "/workspace/baseline-marker-3",
			check:  blockedWith("destructive command on the root filesystem")},
		{name: "at the exception's expiresAt the hook refuses again, by its own clock", pod: pod, tool: "Bash",
			input: map[string]any{"command": "touch /workspace/baseline-marker-4"}, marker: "/workspace/baseline-marker-4",
			setup: func(t *testing.T) {
				time.Sleep(time.Until(gex.Spec.ExpiresAt.Time))
				if code := probe(t); code != 2 {
					t.Errorf("at expiresAt (+%s) the pod's hook still answers exit %d", time.Since(gex.Spec.ExpiresAt.Time).Round(time.Millisecond), code)
				}
			},
			check: blockedWith(fleetReason)},
	}
	cleanup := func() {
		for _, o := range []client.Object{gex, chap} {
			if err := c.Delete(context.Background(), o); client.IgnoreNotFound(err) != nil {
				t.Errorf("removing %s: %v", o.GetName(), err)
			}
		}
	}
	return cases, cleanup
}

// fleetNames lists the case names, for the log.
func fleetNames(cases []podCase) string {
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
	}
	return strings.Join(names, "; ")
}
