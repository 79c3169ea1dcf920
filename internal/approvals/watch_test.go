package approvals

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// shardOf owns the keys it lists.
type shardOf map[string]bool

func (s shardOf) Acquire(key string) (func(), bool) { return func() {}, s[key] }

func fakeStore(t *testing.T, clk *testingclock.FakePassiveClock) (*Store, client.Client) {
	t.Helper()
	s := runtime.NewScheme()
	if err := gatev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&gatev1.ToolApproval{}).Build()
	return &Store{Client: cl, Reader: cl, Namespace: "agents", Confirmer: "agents", ConfirmerUID: "uid-1", Policy: "coding-agents",
		Deadline: 15 * time.Minute, Log: logr.Discard(), Clock: clk}, cl
}

// TestWatchExpiresHTTPApprovals: an approval of an HTTP surface nobody answered waits for its
// deadline, is left to the replica the shard gives it, and is then recorded Expired (reason
// NoAnswer); the caller polling it reads Pending until the deadline and Expired after.
func TestWatchExpiresHTTPApprovals(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakePassiveClock(time.Now())
	a, cl := fakeStore(t, clk)
	ta, err := a.Ensure(ctx, Request{Surface: gatev1.SurfaceHarness, Session: "run_1", ToolUseID: "ap_1", Tool: "deploy", RawInput: []byte(`{}`),
		ExpiresAt: clk.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	w := &Watch{Approvals: a, Shard: shardOf{}}
	if !w.wanted(ta) {
		t.Fatal("a pending approval is not watched")
	}
	if wait, err := w.handle(ctx, ta.Name); err != nil || wait <= 0 || wait > time.Minute {
		t.Fatalf("before the deadline: wait %s, %v", wait, err)
	}
	if s := EffectiveState(ta, clk.Now()); s != gatev1.ApprovalPending {
		t.Fatalf("before the deadline the caller reads %s", s)
	}
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	if s := EffectiveState(ta, clk.Now()); s != gatev1.ApprovalExpired {
		t.Fatalf("after the deadline the caller reads %s", s)
	}
	if wait, err := w.handle(ctx, ta.Name); err != nil || wait != 30*time.Second {
		t.Fatalf("another replica's approval: wait %s, %v", wait, err)
	}
	w.Shard = shardOf{ta.Name: true}
	if wait, err := w.handle(ctx, ta.Name); err != nil || wait != 0 {
		t.Fatalf("this replica's approval: wait %s, %v", wait, err)
	}
	got := &gatev1.ToolApproval{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(ta), got); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionExpired)
	if got.Status.State != gatev1.ApprovalExpired || cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != gatev1.ReasonNoAnswer {
		t.Fatalf("status %+v", got.Status)
	}
	if w.wanted(got) {
		t.Fatal("an expired approval of an HTTP surface is still watched")
	}
	if _, err := a.Expire(ctx, got); err != ErrSettled {
		t.Fatalf("expiring it again: %v, want ErrSettled", err)
	}
}

// TestAnswerOf: an Approved counts only with the approver recorded before the deadline; every
// other final state is its own answer, and a state that is not final is no answer.
func TestAnswerOf(t *testing.T) {
	expires := time.Now()
	before, after := metav1.NewTime(expires.Add(-time.Minute)), metav1.NewTime(expires.Add(time.Minute))
	for _, tc := range []struct {
		state    gatev1.ToolApprovalState
		decision *gatev1.ToolApprovalDecision
		want     Answer
	}{
		{"", nil, NoAnswer},
		{gatev1.ApprovalPending, nil, NoAnswer},
		{gatev1.ApprovalApproved, &gatev1.ToolApprovalDecision{User: "alice", Time: &before}, Approved},
		{gatev1.ApprovalApproved, &gatev1.ToolApprovalDecision{User: "alice"}, Approved},
		{gatev1.ApprovalApproved, &gatev1.ToolApprovalDecision{User: "alice", Time: &after}, NoAnswer},
		{gatev1.ApprovalApproved, &gatev1.ToolApprovalDecision{Time: &before}, NoAnswer},
		{gatev1.ApprovalApproved, nil, NoAnswer},
		{gatev1.ApprovalDenied, nil, Denied},
		{gatev1.ApprovalExpired, nil, Expired},
		{gatev1.ApprovalAnsweredInRuntime, nil, AnsweredInRuntime},
	} {
		ta := &gatev1.ToolApproval{Spec: gatev1.ToolApprovalSpec{ExpiresAt: metav1.NewTime(expires)},
			Status: gatev1.ToolApprovalStatus{State: tc.state, Decision: tc.decision}}
		if got := AnswerOf(ta); got != tc.want {
			t.Errorf("%q with decision %+v: %v, want %v", tc.state, tc.decision, got, tc.want)
		}
	}
	if AnswerOf(nil) != NoAnswer {
		t.Error("no approval is an answer")
	}
}
