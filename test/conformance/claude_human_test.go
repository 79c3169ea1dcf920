//go:build conformance

package conformance

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic/messagestest"
	"github.com/intutic/gate-operator/internal/confirmerconfig"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/webhook"
)

// humanLaneInPod runs the human lane of the hook surface (docs/gate-agent.md, "A human lane")
// with the real Claude Code, headless, in a sandbox pod: the policy names the SessionConfirmer
// decisionTrailInPod applied (spec.gateAgent.humanApproval), whose gate API admits the pods'
// ServiceAccount. An Ask of the sample policy (shell-not-static) ends the print-mode run with
// the call deferred and a ToolApproval pending; approved with `kubectl gate approve`, the call
// runs when the session is resumed (claude -p --resume), and denied with `kubectl gate deny`
// it does not, the model receiving the approver's message. The agent's container can reach the
// confirmer's port (the egress the lane adds) but holds no token it accepts.
func humanLaneInPod(ctx context.Context, t *testing.T, env *localenv.Env, policyKey types.NamespacedName) {
	const confirmer = "coding-agents"
	c := env.Client
	t.Run("the human lane: setup", func(t *testing.T) {
		// The confirmer reviews the sidecar's token, as docs/confirmer.md has its operator allow.
		mustDo(t, c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: confirmer + "-confirmer-auth"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: podNamespace, Name: confirmerconfig.ServiceName(confirmer)}}}))
		sc := &gatev1.SessionConfirmer{}
		mustDo(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, types.NamespacedName{Namespace: podNamespace, Name: confirmer}, sc); err != nil {
				return err
			}
			sc.Spec.GateAPI.AllowedServiceAccounts = append(sc.Spec.GateAPI.AllowedServiceAccounts, podNamespace+"/default")
			return c.Update(ctx, sc)
		}))
		waitConfirmerRolledOut(ctx, t, env, confirmerconfig.ServiceName(confirmer), podNamespace+"/default")
		p := &gatev1.HarnessAgentPolicy{}
		mustDo(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, policyKey, p); err != nil {
				return err
			}
			p.Spec.GateAgent = &gatev1.GateAgentSpec{HumanApproval: &gatev1.GateAgentHumanApproval{Confirmer: confirmer}}
			return c.Update(ctx, p)
		}))
		waitPolicy(ctx, t, env, policyKey, p.Generation)
	})
	pod := applyClaudePod(ctx, t, env, "coding-agent-human", nil)

	t.Run("the human lane: the agent reaches the confirmer's port and holds no token it accepts", func(t *testing.T) {
		svc := &corev1.Service{}
		mustDo(t, c.Get(ctx, types.NamespacedName{Namespace: podNamespace, Name: confirmerconfig.ServiceName(confirmer)}, svc))
		var eps corev1.PodList
		mustDo(t, c.List(ctx, &eps, client.InNamespace(podNamespace), client.MatchingLabels{gatev1.LabelConfirmer: confirmer}))
		var dests []string
		for _, p := range eps.Items {
			if p.Status.PodIP != "" {
				dests = append(dests, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(confirmerconfig.ServicePort)))
			}
		}
		got, err := env.Probe(ctx, podNamespace, pod, "agent", dests...)
		mustDo(t, err)
		reachable := len(dests) > 0
		for _, d := range dests {
			reachable = reachable && got[d] == "open"
		}
		// The agent's container mounts no token: not the confirmer's, not the API server's.
		ls, code, err := env.Exec(ctx, podNamespace, pod, "agent", "", "/bin/busybox", "sh", "-c", "ls /var/run/secrets 2>&1; cat "+webhook.ConfirmerTokenDir+"/token 2>&1")
		mustDo(t, err)
		// Without a token the confirmer refuses it (401), as it refuses the API server's own.
		url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(confirmerconfig.ServicePort)) + "/v1/hook/approvals"
		wget, _, err := env.Exec(ctx, podNamespace, pod, "agent", "", "/bin/busybox", "sh", "-c",
			"/bin/busybox wget -q -O- --header 'Gate-Human-Approval: create' --post-data '{}' "+url+" 2>&1; echo exit=$?")
		mustDo(t, err)
		t.Logf("from the agent's container: %v; ls/cat: %q (exit %d); wget without a token: %q", got, ls, code, wget)
		ok := reachable && !strings.Contains(ls, "eyJ") && strings.Contains(wget, "401") && !strings.Contains(wget, "exit=0")
		record(t, claudePkg, "in a pod with the human lane: the agent reaches the confirmer's port, mounts no token, and is refused without one", ok,
			fmt.Sprintf("probe %v; ls %q; wget %q", got, ls, wget))
	})

	for _, tc := range []struct {
		name, marker, verb, message string
		check                       func(r claudeRun) (bool, string)
	}{
		{name: "a deferred call approved with kubectl gate approve runs when the session is resumed", marker: "/workspace/human-approved", verb: "approve", message: "ship it",
			check: func(r claudeRun) (bool, string) {
				return r.marker && r.result.Answered && !r.result.IsError, fmt.Sprintf("ran %v; tool_result %+v", r.marker, r.result)
			}},
		{name: "a deferred call denied with kubectl gate deny does not run when the session is resumed", marker: "/workspace/human-denied", verb: "deny", message: "not today",
			check: func(r claudeRun) (bool, string) {
				return !r.marker && r.result.IsError && strings.Contains(r.result.Content, "not today"), fmt.Sprintf("ran %v; tool_result %+v", r.marker, r.result)
			}},
	} {
		t.Run("the human lane: "+tc.name, func(t *testing.T) {
			mustDo(t, env.MessagesScript(ctx, messagestest.Script{Tool: "Bash", Input: map[string]any{"command": "CMD=touch; $CMD " + tc.marker}}))
			first := runClaudeInPodWith(ctx, t, env, pod, claudeArgs("--allowedTools", "Bash"))
			session, _ := first.out["session_id"].(string)
			deferred, _ := first.out["deferred_tool_use"].(map[string]any)
			t.Logf("first run: stop_reason %v, deferred_tool_use %v, session %s", first.out["stop_reason"], deferred, session)
			ta := hookApproval(ctx, t, env, pod, session)
			if first.out["stop_reason"] != "tool_deferred" || deferred == nil || first.result.Answered || ta == nil {
				t.Logf("gate-agent's log:\n%s", sidecarLog(ctx, t, env, pod))
				record(t, claudePkg, "in a pod with the human lane: "+tc.name, false,
					fmt.Sprintf("the first run did not end deferred with a pending ToolApproval: stop_reason %v, tool_result %+v, approval %v", first.out["stop_reason"], first.result, ta != nil))
				return
			}
			if _, code, _ := env.Exec(ctx, podNamespace, pod, "agent", "", "/bin/test", "-e", tc.marker); code == 0 {
				record(t, claudePkg, "in a pod with the human lane: "+tc.name, false, "the deferred call ran before anyone answered")
				return
			}
			out, err := env.Gate(ctx, tc.verb, ta.Name, "-n", podNamespace, "--message", tc.message)
			mustDo(t, err)
			t.Logf("kubectl gate %s %s: %s", tc.verb, ta.Name, strings.TrimSpace(out))
			resumed := runClaudeInPodWith(ctx, t, env, pod, []string{"-p", "--resume", session, "--output-format", "json", "--allowedTools", "Bash"})
			_, code, err := env.Exec(ctx, podNamespace, pod, "agent", "", "/bin/test", "-e", tc.marker)
			mustDo(t, err)
			resumed.marker = code == 0
			ok, detail := tc.check(resumed)
			if ok {
				ok, detail = answeredFromApproval(ctx, t, env, pod, ta.Name, tc.verb)
			}
			record(t, claudePkg, "in a pod with the human lane: "+tc.name, ok, detail)
		})
	}
}

// hookApproval is the ToolApproval of the pod's session's held call, once the confirmer
// created it; nil when none appears.
func hookApproval(ctx context.Context, t *testing.T, env *localenv.Env, pod, session string) *gatev1.ToolApproval {
	t.Helper()
	var found *gatev1.ToolApproval
	_ = localenv.Wait(ctx, 30*time.Second, func() (bool, error) {
		var l gatev1.ToolApprovalList
		if err := env.Client.List(ctx, &l, client.InNamespace(podNamespace)); err != nil {
			return false, err
		}
		i := slices.IndexFunc(l.Items, func(ta gatev1.ToolApproval) bool {
			return ta.Spec.Surface == gatev1.SurfaceHook && ta.Spec.SessionID == session && ta.Spec.Pod != nil && ta.Spec.Pod.Name == pod &&
				ta.Status.State == gatev1.ApprovalPending
		})
		if i >= 0 {
			found = &l.Items[i]
		}
		return found != nil, nil
	})
	if found != nil {
		t.Logf("ToolApproval %s: tool %s, rule %s, pod %s/%s, snapshot %s", found.Name, found.Spec.Tool, found.Spec.Rule, found.Spec.Pod.Name, found.Spec.Pod.UID, found.Spec.SnapshotDigest)
	}
	return found
}

// answeredFromApproval checks the sidecar's records: the deferred call and the resumed one
// name the approval, the second with the human's answer.
func answeredFromApproval(ctx context.Context, t *testing.T, env *localenv.Env, pod, approval, verb string) (bool, string) {
	want := map[string]string{"approve": "Approved", "deny": "Denied"}[verb]
	var deferred, answered bool
	for _, r := range sidecarRecords(ctx, t, env, pod) {
		if r.Approval == nil || r.Approval.Name != approval || r.Surface != decisionlog.SurfaceHookSidecar {
			continue
		}
		deferred = deferred || r.Approval.State == "Pending"
		answered = answered || r.Approval.State == want
	}
	return deferred && answered, fmt.Sprintf("the sidecar's records of %s: deferred %v, answered %s %v", approval, deferred, want, answered)
}

// waitConfirmerRolledOut waits until the confirmer's Deployment runs with arg (the controller
// has rendered the SessionConfirmer's change) on every replica, and no replica of before is left.
func waitConfirmerRolledOut(ctx context.Context, t *testing.T, env *localenv.Env, name, arg string) {
	t.Helper()
	start := time.Now()
	mustDo(t, localenv.Wait(ctx, 3*time.Minute, func() (bool, error) {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: podNamespace, Name: name}, d); err != nil {
			return false, err
		}
		rendered := slices.ContainsFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool {
			return slices.ContainsFunc(c.Args, func(a string) bool { return strings.Contains(a, arg) })
		})
		want := *d.Spec.Replicas
		s := d.Status
		return rendered && s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want && s.Replicas == want, nil
	}))
	t.Logf("the confirmer %s runs with %s on every replica after %s", name, arg, time.Since(start).Round(time.Second))
}

// sidecarLog is the gate-agent's own log lines (not its records), for a failure's detail.
func sidecarLog(ctx context.Context, t *testing.T, env *localenv.Env, pod string) string {
	t.Helper()
	logs, err := env.Kubectl(ctx, "", "-n", podNamespace, "logs", pod, "-c", webhook.GateAgentContainerName)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		if line != "" && !strings.Contains(line, decisionlog.Schema) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
