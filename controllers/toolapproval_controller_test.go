package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/testutil"
)

// finishedApproval creates a ToolApproval that expired at expires and writes its status: state,
// and a decision at decided when that is not zero. There is no decision webhook in this suite,
// so the test writes the decision time itself.
func finishedApproval(ctx context.Context, t *testing.T, ns, name string, state gatev1.ToolApprovalState, expires, decided time.Time) *gatev1.ToolApproval {
	t.Helper()
	ta := &gatev1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gatev1.ToolApprovalSpec{
			Surface: gatev1.SurfaceHarness, Policy: "default", ToolUseID: "call_" + name, Tool: "deployService",
			Input: gatev1.ToolApprovalInput{Size: 2, SHA256: strings.Repeat("0f", 32)}, ExpiresAt: metav1.NewTime(expires),
		},
	}
	if err := k8sClient.Create(ctx, ta); err != nil {
		t.Fatal(err)
	}
	ta.Status.State = state
	if !decided.IsZero() {
		ta.Status.Decision = &gatev1.ToolApprovalDecision{User: "alice", Time: &metav1.Time{Time: decided}}
	}
	if err := k8sClient.Status().Update(ctx, ta); err != nil {
		t.Fatal(err)
	}
	return ta
}

func exists(ctx context.Context, ta *gatev1.ToolApproval) (bool, error) {
	err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ta), &gatev1.ToolApproval{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// TestToolApprovalRetention: with a retention of an hour, finished approvals whose decision (or,
// without one, whose deadline) is older are deleted at once; one whose hour runs out a few
// seconds into the test is deleted then, not before; a fresh decision and every pending approval,
// however old its deadline, are kept.
func TestToolApprovalRetention(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "retention-")
	now := time.Now()
	longAgo := now.Add(-testRetention - time.Hour)

	old := finishedApproval(ctx, t, ns, "approved-long-ago", gatev1.ApprovalApproved, now.Add(time.Hour), longAgo)
	expired := finishedApproval(ctx, t, ns, "expired-long-ago", gatev1.ApprovalExpired, longAgo, time.Time{})
	// soon's retention runs out 10 s into the test (decision times are stored to the second).
	soonDue := now.Add(10 * time.Second).Truncate(time.Second)
	soon := finishedApproval(ctx, t, ns, "denied-an-hour-ago", gatev1.ApprovalDenied, now.Add(time.Hour), soonDue.Add(-testRetention))
	fresh := finishedApproval(ctx, t, ns, "denied-now", gatev1.ApprovalDenied, now.Add(time.Hour), now)
	pending := finishedApproval(ctx, t, ns, "pending-long-ago", gatev1.ApprovalPending, longAgo, time.Time{})

	testutil.Eventually(t, 10*time.Second, func() error {
		for _, ta := range []*gatev1.ToolApproval{old, expired} {
			if there, err := exists(ctx, ta); there || err != nil {
				return fmt.Errorf("%s is still there (%v)", ta.Name, err)
			}
		}
		return nil
	})
	// On a slow machine the writes and waits above can outlast soon's retention; then there is
	// nothing left to check before it runs out.
	if time.Now().Before(soonDue.Add(-time.Second)) {
		if there, err := exists(ctx, soon); !there || err != nil {
			t.Fatalf("%s was deleted before its retention ran out (%v)", soon.Name, err)
		}
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if there, err := exists(ctx, soon); there || err != nil {
			return fmt.Errorf("%s is still there after its retention ran out (%v)", soon.Name, err)
		}
		return nil
	})
	if time.Now().Before(soonDue) {
		t.Errorf("%s was deleted before its time", soon.Name)
	}
	for _, ta := range []*gatev1.ToolApproval{fresh, pending} {
		if there, err := exists(ctx, ta); !there || err != nil {
			t.Errorf("%s was deleted (%v)", ta.Name, err)
		}
	}
}

// TestRetainedUntil: the decision time counts, else the deadline; pending is never due.
func TestRetainedUntil(t *testing.T) {
	expires := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	decided := expires.Add(-10 * time.Minute)
	for _, tc := range []struct {
		name    string
		state   gatev1.ToolApprovalState
		decided *metav1.Time
		want    time.Time
		due     bool
	}{
		{"approved", gatev1.ApprovalApproved, &metav1.Time{Time: decided}, decided.Add(24 * time.Hour), true},
		{"expired without a decision", gatev1.ApprovalExpired, nil, expires.Add(24 * time.Hour), true},
		{"pending", gatev1.ApprovalPending, nil, time.Time{}, false},
		{"unset", "", nil, time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := &gatev1.ToolApproval{Spec: gatev1.ToolApprovalSpec{ExpiresAt: metav1.NewTime(expires)}, Status: gatev1.ToolApprovalStatus{State: tc.state}}
			if tc.decided != nil {
				ta.Status.Decision = &gatev1.ToolApprovalDecision{Time: tc.decided}
			}
			got, due := RetainedUntil(ta, 24*time.Hour)
			if due != tc.due || !got.Equal(tc.want) {
				t.Errorf("RetainedUntil = %v, %v; want %v, %v", got, due, tc.want, tc.due)
			}
		})
	}
}
