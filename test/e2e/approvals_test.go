package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/localenv"
)

// approvalDeadline is the SessionConfirmer's humanApproval.deadline in this test: long enough
// for the test to approve one call, short enough to watch the other expire.
const approvalDeadline = 45 * time.Second

// testApprovals: two web fetches that the sample policy sends to a human become ToolApprovals.
// A user bound to gate-operator-approver approves one with `kubectl gate approve`, and the fake
// session receives allow for it exactly once; a user without the role is refused; the other
// call, left alone, is denied at its deadline and its ToolApproval is Expired.
func testApprovals(ctx context.Context, t *testing.T, env *localenv.Env) {
	c := env.Client
	const session = "sesn_e2e_approvals"
	ids, err := env.FakeSession(ctx, session, "agent_e2e",
		anthropictest.ToolUse{Name: "web_fetch", Input: map[string]any{"url": "https://docs.example.org/approve-me"}, Permission: "ask"},
		anthropictest.ToolUse{Name: "web_fetch", Input: map[string]any{"url": "https://docs.example.org/leave-me"}, Permission: "ask"},
	)
	must(t, err)
	must(t, c.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-approves"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "gate-operator-approver"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}},
	}))
	// mallory may read approvals and write their status, but lacks the verb approve: only the
	// admission webhook stands between her and a decision.
	must(t, localenv.GrantStatusWriter(ctx, c, ns, "mallory"))

	byCall := map[string]gatev1.ToolApproval{}
	wait(t, "both held calls have a ToolApproval", func() bool {
		list := &gatev1.ToolApprovalList{}
		if c.List(ctx, list, client.InNamespace(ns)) != nil {
			return false
		}
		for _, a := range list.Items {
			if a.Spec.SessionID == session {
				byCall[a.Spec.ToolUseID] = a
			}
		}
		return len(byCall) == 2
	})
	approve, leave := byCall[ids[0]], byCall[ids[1]]
	if approve.Spec.Tool != "web_fetch" || approve.Spec.Rule != "fetch-needs-human" || approve.Spec.Policy != "coding-agents" || approve.Spec.Input.Preview != "" || len(approve.Spec.Input.SHA256) != 64 {
		t.Errorf("the ToolApproval does not describe the held call: %+v", approve.Spec)
	}
	pending, err := env.Gate(ctx, "pending", "-n", ns)
	must(t, err)
	t.Logf("kubectl gate pending -n %s:\n%s", ns, pending)
	if !strings.Contains(pending, approve.Name) || !strings.Contains(pending, leave.Name) {
		t.Errorf("kubectl gate pending does not list both approvals:\n%s", pending)
	}

	// A user without the verb approve on the policy is refused by the admission webhook.
	if out, err := env.Gate(ctx, "approve", approve.Name, "-n", ns, "--as", "mallory", "--message", "looks fine"); err == nil {
		t.Fatalf("mallory approved without the role: %s", out)
	} else {
		t.Logf("mallory refused: %v", err)
		if !strings.Contains(err.Error(), `admission webhook "toolapprovals.gate.intutic.io" denied the request: user mallory may not approve calls of policy agents/coding-agents`) {
			t.Errorf("the refusal does not say what is missing: %v", err)
		}
	}
	out, err := env.Gate(ctx, "approve", approve.Name, "-n", ns, "--as", "alice", "--message", "docs fetch is fine")
	must(t, err)
	t.Logf("alice: %s", strings.TrimSpace(out))

	count := func(id string) (n int, last map[string]any) {
		got, err := env.FakeConfirmations(ctx, session)
		must(t, err)
		for _, e := range got {
			if e["tool_use_id"] == id {
				n, last = n+1, e
			}
		}
		return n, last
	}
	wait(t, "the approved call is confirmed", func() bool { n, _ := count(ids[0]); return n > 0 })
	wait(t, "the call left alone is denied at its deadline", func() bool { n, _ := count(ids[1]); return n > 0 })
	// Both answers are in; a few more polling rounds must not add a second one.
	time.Sleep(6 * time.Second)
	if n, e := count(ids[0]); n != 1 || e["result"] != "allow" {
		t.Errorf("the approved call: %d confirmations, last %v; want exactly one allow", n, e)
	}
	if n, e := count(ids[1]); n != 1 || e["result"] != "deny" || !strings.Contains(e["deny_message"].(string), "no human approved this call within") {
		t.Errorf("the expired call: %d confirmations, last %v; want exactly one deny naming the deadline", n, e)
	}

	got := &gatev1.ToolApproval{}
	must(t, c.Get(ctx, client.ObjectKeyFromObject(&approve), got))
	if got.Status.State != gatev1.ApprovalApproved || got.Status.Decision == nil || got.Status.Decision.User != "alice" || got.Status.Decision.Message != "docs fetch is fine" {
		t.Errorf("the approved ToolApproval's status: %+v", got.Status)
	}
	wait(t, "the other ToolApproval is Expired", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(&leave), got) == nil && got.Status.State == gatev1.ApprovalExpired
	})
	events, err := env.Kubectl(ctx, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.kind=ToolApproval", "-o", "custom-columns=OBJECT:.involvedObject.name,REASON:.reason,MESSAGE:.message")
	must(t, err)
	t.Logf("events on the ToolApprovals:\n%s", events)
}
