package confirm

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/approvals"
	"github.com/intutic/gate-operator/internal/gate"
)

// TestSquattedApprovalIsNotAdopted: an object created under the call's name before the call,
// describing it but with a forged preview, reason and a one-hour expiresAt, and "Approved" by
// its author, is never adopted: the call stays held, is denied at its deadline, and the object
// is left as its author wrote it.
func TestSquattedApprovalIsNotAdopted(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	ids := f.AddSession("sesn_s", "agent_1", deploy())
	a, cl := fakeApprovals(t, interceptor.Funcs{})
	c := newConfirmer(t, f)
	c.Approvals = a
	now := time.Now()
	clk := testingclock.NewFakePassiveClock(now)
	c.Clock, a.Clock = clk, clk

	squat := a.Object(approvals.Request{Surface: gatev1.SurfaceManagedAgents, Session: "sesn_s", ToolUseID: ids[0], Tool: "mcp__deploy__run",
		RawInput: []byte(`{"env":"prod"}`), Decision: gate.Decision{Rule: "deploys-need-human", Reason: "deploys need a human"}, ExpiresAt: now.Add(time.Hour)})
	squat.Spec.Input.Preview = `{"env":"staging"}`
	squat.Spec.Reason = "routine staging deploy"
	if err := cl.Create(ctx, squat); err != nil {
		t.Fatal(err)
	}
	answerApproval(ctx, t, cl, squat.Name, gatev1.ApprovalApproved, "mallory", "", now)

	if out, err := c.AnswerSession(ctx, "sesn_s"); err != nil || out.Confirmed != 0 || out.Held != 1 {
		t.Fatalf("the squatted call was answered: %+v %v (%v)", out, err, confirmations(t, f, "sesn_s"))
	}
	clk.SetTime(now.Add(16 * time.Minute))
	if out, err := c.AnswerSession(ctx, "sesn_s"); err != nil || out.Confirmed != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	if got := confirmations(t, f, "sesn_s")[ids[0]]; !strings.HasPrefix(got, "deny:[Intutic Governance] BLOCKED: no human approved this call") {
		t.Fatalf("confirmation %q, want the deadline's denial", got)
	}
	if ta := getApproval(ctx, t, cl, squat.Name); ta.Status.State != gatev1.ApprovalApproved || ta.Status.Decision.User != "mallory" {
		t.Fatalf("the squatter's object was written: %+v", ta.Status)
	}
}

// skewedWebhook admits status writes as the admission webhook does, on the API server's own
// clock: Approved and Denied only before spec.expiresAt, with the decision's time its own;
// Expired only at or after it.
func skewedWebhook(server *testingclock.FakePassiveClock) interceptor.Funcs {
	refuse := func(msg string) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: gatev1.GroupVersion.Group, Resource: "toolapprovals"}, "", &refusal{msg})
	}
	return interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		ta := obj.(*gatev1.ToolApproval)
		before := server.Now().Before(ta.Spec.ExpiresAt.Time)
		switch {
		case ta.Status.State.ByApprover() && !before:
			return refuse("the decision arrived after the deadline")
		case ta.Status.State == gatev1.ApprovalExpired && before:
			return refuse("Expired is refused until spec.expiresAt")
		case ta.Status.State.ByApprover():
			ta.Status.Decision.Time = &metav1.Time{Time: server.Now()}
		}
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}}
}

type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

// TestClockAheadKeepsTheRecordTrue: with the confirmer's clock 40 s ahead of the API server's, a call past the confirmer's deadline but not the server's is not denied while a
// human may still answer it; the answer the server admits is the one the call gets, and a call
// nobody answers is denied once Expired is recorded. Whatever happens, a call that was denied
// never has a record saying Approved.
func TestClockAheadKeepsTheRecordTrue(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	server := testingclock.NewFakePassiveClock(now)
	f := newFake(t)
	ids := f.AddSession("sesn_k", "agent_1", deploy(), deploy())
	a, cl := fakeApprovals(t, skewedWebhook(server))
	c := newConfirmer(t, f)
	c.Approvals = a
	clk := testingclock.NewFakePassiveClock(now)
	c.Clock, a.Clock = clk, clk
	if out, err := c.AnswerSession(ctx, "sesn_k"); err != nil || out.Held != 2 {
		t.Fatalf("%+v %v", out, err)
	}
	var l gatev1.ToolApprovalList
	if err := cl.List(ctx, &l); err != nil || len(l.Items) != 2 {
		t.Fatalf("%d approvals, %v", len(l.Items), err)
	}
	name := map[string]string{}
	for _, ta := range l.Items {
		name[ta.Spec.ToolUseID] = ta.Name
	}
	expires := l.Items[0].Spec.ExpiresAt.Time

	// The confirmer is past the deadline, the server 20 s before it.
	clk.SetTime(expires.Add(20 * time.Second))
	server.SetTime(expires.Add(-20 * time.Second))
	if _, err := c.AnswerSession(ctx, "sesn_k"); err != nil {
		t.Fatal(err)
	}
	// alice approves the first call: the server admits it, before its deadline.
	answerApproval(ctx, t, cl, name[ids[0]], gatev1.ApprovalApproved, "alice", "", server.Now())
	clk.SetTime(expires.Add(30 * time.Second))
	if _, err := c.AnswerSession(ctx, "sesn_k"); err != nil {
		t.Fatal(err)
	}
	// The server reaches the deadline: the second call, unanswered, is recorded Expired and denied.
	server.SetTime(expires.Add(time.Second))
	clk.SetTime(expires.Add(41 * time.Second))
	if _, err := c.AnswerSession(ctx, "sesn_k"); err != nil {
		t.Fatal(err)
	}
	got := confirmations(t, f, "sesn_k")
	for i, want := range []gatev1.ToolApprovalState{gatev1.ApprovalApproved, gatev1.ApprovalExpired} {
		ta := getApproval(ctx, t, cl, name[ids[i]])
		denied := strings.HasPrefix(got[ids[i]], "deny:")
		if denied && ta.Status.State == gatev1.ApprovalApproved {
			t.Errorf("call %d was denied (%q) and its record says Approved by %s", i, got[ids[i]], ta.Status.Decision.User)
		}
		if ta.Status.State != want || meta.FindStatusCondition(ta.Status.Conditions, string(want)) == nil {
			t.Errorf("call %d: record %s, want %s", i, ta.Status.State, want)
		}
	}
	if got[ids[0]] != "allow" || !strings.HasPrefix(got[ids[1]], "deny:[Intutic Governance] BLOCKED: no human approved") {
		t.Errorf("confirmations %v", got)
	}
}
