package gateapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// Tokens of the fake reviewer bound to pods: two pods of the confirmer's namespace, and one of
// another namespace.
const (
	podTok        = "pod-token"
	otherPodTok   = "other-pod-token"
	foreignPodTok = "foreign-pod-token"
)

// hookBody is a sidecar's request for the approval of a held Bash call of session s1.
func hookBody(policy, command string) string {
	in, _ := json.Marshal(map[string]any{"session_id": "s1", "hook_event_name": "PreToolUse", "tool_name": "Bash",
		"tool_input": map[string]any{"command": command}, "tool_use_id": "toolu_9", "cwd": "/workspace", "permission_mode": "default"})
	b, _ := json.Marshal(map[string]any{"runtime": "claude-code", "input": json.RawMessage(in), "policy": policy,
		"decision": map[string]any{"verdict": "Ask", "rule": "kubectl-needs-human", "reason": "kubectl changes the cluster", "snapshotDigest": "sha256:" + strings.Repeat("a", 64), "incidentId": "inc-1"}})
	return string(b)
}

var heldCall = hookBody("agents/coding-agents", "kubectl apply -f prod.yaml")

// TestHookApproval: a sidecar's first request creates the call's approval, Pending; every later
// one for the same call (the resumed session) reads it, and reads the human's answer. The
// approval is bound to the pod its token names: another pod asking for the same call gets
// another approval.
func TestHookApproval(t *testing.T) {
	ctx := context.Background()
	srv, cl := approvalAPI(t, interceptor.Funcs{}, true)
	opt := []string{HeaderHumanApproval, "create"}
	post := func(token, body string) (int, map[string]any) {
		t.Helper()
		status, _, raw := do(t, srv, "POST", "/v1/hook/approvals", token, body, opt...)
		return status, decode(t, raw)
	}
	status, first := post(podTok, heldCall)
	name, _ := first["name"].(string)
	if status != 200 || first["state"] != "Pending" || name == "" {
		t.Fatalf("%d %v", status, first)
	}
	if status, again := post(podTok, heldCall); status != 200 || again["name"] != name || again["state"] != "Pending" {
		t.Fatalf("the resumed call: %d %v, want %s Pending", status, again, name)
	}
	ta := &gatev1.ToolApproval{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "agents", Name: name}, ta); err != nil {
		t.Fatal(err)
	}
	sp := ta.Spec
	if sp.Surface != gatev1.SurfaceHook || sp.SessionID != "s1" || sp.ToolUseID != "toolu_9" || sp.Tool != "Bash" || sp.Rule != "kubectl-needs-human" ||
		sp.Policy != "coding-agents" || sp.SnapshotDigest != "sha256:"+strings.Repeat("a", 64) || sp.Pod == nil || *sp.Pod != (gatev1.ToolApprovalPod{Name: "coding-agent-0", UID: "pod-uid-1"}) ||
		sp.Input.Size != int64(len(`{"command":"kubectl apply -f prod.yaml"}`)) {
		t.Fatalf("spec %+v", sp)
	}

	// Another pod, the same session and call: another approval, which this one's answer does not reach.
	if status, other := post(otherPodTok, heldCall); status != 200 || other["name"] == name {
		t.Fatalf("another pod's call: %d %v", status, other)
	}
	now := time.Now()
	if err := ta.Settle(gatev1.ApprovalApproved, gatev1.ReasonApprovedByUser, "", now); err != nil {
		t.Fatal(err)
	}
	ta.Status.Decision = &gatev1.ToolApprovalDecision{User: "alice", Message: "go", Time: &metav1.Time{Time: now}}
	if err := cl.Status().Update(ctx, ta); err != nil {
		t.Fatal(err)
	}
	if status, out := post(podTok, heldCall); status != 200 || out["state"] != "Approved" || out["user"] != "alice" {
		t.Fatalf("after the approval: %d %v", status, out)
	}
	if _, out := post(otherPodTok, heldCall); out["state"] != "Pending" {
		t.Fatalf("the other pod's call read %v", out)
	}
	// Another input is another call: the approval of the first does not carry over.
	if _, out := post(podTok, hookBody("agents/coding-agents", "kubectl delete ns prod")); out["name"] == name || out["state"] != "Pending" {
		t.Fatalf("another input: %v", out)
	}
	// The rules changed since (another snapshot digest): the approval does not describe the call.
	changed := strings.Replace(heldCall, strings.Repeat("a", 64), strings.Repeat("b", 64), 1)
	if status, out := post(podTok, changed); status != 409 || out["code"] != CodeApprovalNotTrusted {
		t.Fatalf("a call decided by other rules: %d %v", status, out)
	}
}

// TestHookApprovalRefusals: only a pod-bound token of the confirmer's namespace, only with the
// opt-in header, only a Claude Code Ask of the confirmer's policy.
func TestHookApprovalRefusals(t *testing.T) {
	srv, _ := approvalAPI(t, interceptor.Funcs{}, true)
	plain, _ := approvalAPI(t, interceptor.Funcs{}, false)
	down, _ := approvalAPI(t, interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
		return errors.New("the API server is down")
	}}, true)
	opt := []string{HeaderHumanApproval, "create"}
	ask := func(s string) string { return strings.Replace(heldCall, `"verdict":"Ask"`, s, 1) }
	for _, c := range []struct {
		name, token, body string
		header            []string
		srv               bool
		want              int
		says              string
	}{
		{"no opt-in header", podTok, heldCall, nil, true, 400, "Gate-Human-Approval"},
		{"a confirmer without the human lane", podTok, heldCall, opt, false, 400, "human lane"},
		{"a token bound to no pod", tok, heldCall, opt, true, 403, "bound to its pod"},
		{"a pod of another namespace", foreignPodTok, heldCall, opt, true, 403, "namespace agents"},
		{"another policy", podTok, hookBody("agents/other", "ls"), opt, true, 409, "policy_mismatch"},
		{"not an Ask", podTok, ask(`"verdict":"Block"`), opt, true, 400, "decision.verdict"},
		{"another runtime", podTok, strings.Replace(heldCall, "claude-code", "codex", 1), opt, true, 400, "runtime"},
		{"no tool_use_id", podTok, strings.Replace(heldCall, `,"tool_use_id":"toolu_9"`, "", 1), opt, true, 400, "tool_use_id"},
		{"no snapshot digest", podTok, strings.Replace(heldCall, "sha256:"+strings.Repeat("a", 64), "", 1), opt, true, 400, "snapshotDigest"},
		{"unknown fields", podTok, strings.Replace(heldCall, `"runtime"`, `"allow":true,"runtime"`, 1), opt, true, 400, "allow"},
	} {
		s := srv
		if !c.srv {
			s = plain
		}
		status, _, raw := do(t, s, "POST", "/v1/hook/approvals", c.token, c.body, c.header...)
		if status != c.want || !strings.Contains(string(raw), c.says) {
			t.Errorf("%s: %d %s, want %d saying %q", c.name, status, raw, c.want, c.says)
		}
	}
	if status, _, raw := do(t, down, "POST", "/v1/hook/approvals", podTok, heldCall, opt...); status != 503 || strings.Contains(string(raw), "down") {
		t.Errorf("an approval that cannot be created: %d %s, want 503 without the cause", status, raw)
	}
}
