package v1alpha1_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// TestToolApprovalLifecycle walks every move from every state to every state: only Pending (or
// unset) to a final state is allowed, and it writes the state with its one condition True, the
// reason, the message, observedGeneration and the transition time; every other move is refused
// and leaves the status as it was.
func TestToolApprovalLifecycle(t *testing.T) {
	states := []gatev1.ToolApprovalState{"", gatev1.ApprovalPending, gatev1.ApprovalApproved, gatev1.ApprovalDenied,
		gatev1.ApprovalExpired, gatev1.ApprovalAnsweredInRuntime}
	final := map[gatev1.ToolApprovalState]bool{gatev1.ApprovalApproved: true, gatev1.ApprovalDenied: true,
		gatev1.ApprovalExpired: true, gatev1.ApprovalAnsweredInRuntime: true}
	byApprover := map[gatev1.ToolApprovalState]bool{gatev1.ApprovalApproved: true, gatev1.ApprovalDenied: true}
	approverReason := map[gatev1.ToolApprovalState]string{gatev1.ApprovalApproved: gatev1.ReasonApprovedByUser, gatev1.ApprovalDenied: gatev1.ReasonDeniedByUser}
	// allowed lists, for each state, the states it may move to; a state not listed moves nowhere.
	allowed := map[gatev1.ToolApprovalState][]gatev1.ToolApprovalState{
		"":                     {gatev1.ApprovalApproved, gatev1.ApprovalDenied, gatev1.ApprovalExpired, gatev1.ApprovalAnsweredInRuntime},
		gatev1.ApprovalPending: {gatev1.ApprovalApproved, gatev1.ApprovalDenied, gatev1.ApprovalExpired, gatev1.ApprovalAnsweredInRuntime},
	}
	conditionOf := map[gatev1.ToolApprovalState]string{gatev1.ApprovalApproved: gatev1.ConditionApproved, gatev1.ApprovalDenied: gatev1.ConditionDenied,
		gatev1.ApprovalExpired: gatev1.ConditionExpired, gatev1.ApprovalAnsweredInRuntime: gatev1.ConditionAnsweredInRuntime}
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

	for _, from := range states {
		if from.Final() != final[from] || from.ByApprover() != byApprover[from] || from.ConditionType() != conditionOf[from] || from.ApproverReason() != approverReason[from] {
			t.Errorf("%q: Final %v, ByApprover %v, ConditionType %q, ApproverReason %q", from, from.Final(), from.ByApprover(), from.ConditionType(), from.ApproverReason())
		}
		if want := map[bool]gatev1.ToolApprovalState{true: gatev1.ApprovalPending, false: from}[from == ""]; from.OrPending() != want {
			t.Errorf("%q reads as %q, want %q", from, from.OrPending(), want)
		}
		for _, to := range states {
			ok := false
			for _, s := range allowed[from] {
				ok = ok || s == to
			}
			ta := &gatev1.ToolApproval{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "deploy-1", Generation: 3}}
			ta.Status.State = from
			if from.Final() {
				ta.Status.Conditions = []metav1.Condition{{Type: from.ConditionType(), Status: metav1.ConditionTrue, Reason: "Before", Message: "decided"}}
			}
			before := ta.Status.DeepCopy()
			if from.CanSettle(to) != ok {
				t.Errorf("%q -> %q: CanSettle %v, want %v", from, to, from.CanSettle(to), ok)
			}
			err := ta.Settle(to, gatev1.ReasonNoAnswer, "no human answered", now)
			if !ok {
				if err == nil || !equality.Semantic.DeepEqual(*before, ta.Status) {
					t.Errorf("%q -> %q: refused move returned %v and left status %+v", from, to, err, ta.Status)
				}
				continue
			}
			if err != nil {
				t.Errorf("%q -> %q: %v", from, to, err)
				continue
			}
			c := meta.FindStatusCondition(ta.Status.Conditions, conditionOf[to])
			if ta.Status.State != to || len(ta.Status.Conditions) != 1 || c == nil || c.Status != metav1.ConditionTrue || c.Reason != gatev1.ReasonNoAnswer ||
				c.Message != "no human answered" || c.ObservedGeneration != 3 || !c.LastTransitionTime.Time.Equal(now) {
				t.Errorf("%q -> %q: status %+v", from, to, ta.Status)
			}
		}
	}
	for _, typ := range []string{gatev1.ConditionApproved, gatev1.ConditionDenied, gatev1.ConditionExpired, gatev1.ConditionAnsweredInRuntime} {
		if !gatev1.IsToolApprovalFinalCondition(typ) {
			t.Errorf("%s is not a final condition", typ)
		}
	}
	if gatev1.IsToolApprovalFinalCondition(gatev1.ConditionReady) || gatev1.IsToolApprovalFinalCondition("Pending") {
		t.Error("Ready or Pending counted as a final condition")
	}
}
