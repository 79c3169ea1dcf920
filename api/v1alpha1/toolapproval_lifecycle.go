package v1alpha1

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The lifecycle of a ToolApproval, in one place: it is created Pending (an unset state reads the
// same) and moves once, to a final state, with that state's condition True; then it never
// changes again. Approved and Denied are an approver's answer; Expired and AnsweredInRuntime are
// the confirmer's record of a call answered without one. Who may write which, and when, is the
// admission webhook's to enforce (internal/webhook); what the states are is said here, and every
// controller, webhook, CLI and loop asks these functions instead of comparing states.

// finalStates are the states a ToolApproval settles in, each with the condition type it is
// settled with.
var finalStates = map[ToolApprovalState]string{
	ApprovalApproved:          ConditionApproved,
	ApprovalDenied:            ConditionDenied,
	ApprovalExpired:           ConditionExpired,
	ApprovalAnsweredInRuntime: ConditionAnsweredInRuntime,
}

// Final reports whether s is a final state: a ToolApproval in it never changes again. Pending and
// the unset state are not final.
func (s ToolApprovalState) Final() bool {
	_, ok := finalStates[s]
	return ok
}

// ByApprover reports whether s is an approver's answer (Approved or Denied): written by a user
// with the verb approve on the policy, before spec.expiresAt. The other final states are the
// confirmer's.
func (s ToolApprovalState) ByApprover() bool {
	return s == ApprovalApproved || s == ApprovalDenied
}

// ApproverReason is the reason of the condition an approver's answer settles s with
// (ReasonApprovedByUser, ReasonDeniedByUser); "" for a state that is not an approver's.
func (s ToolApprovalState) ApproverReason() string {
	switch s {
	case ApprovalApproved:
		return ReasonApprovedByUser
	case ApprovalDenied:
		return ReasonDeniedByUser
	}
	return ""
}

// ConditionType is the condition a final state is settled with; "" for a state that is not final.
func (s ToolApprovalState) ConditionType() string {
	return finalStates[s]
}

// IsToolApprovalFinalCondition reports whether a condition type is the condition of a final state.
func IsToolApprovalFinalCondition(conditionType string) bool {
	for _, t := range finalStates {
		if t == conditionType {
			return true
		}
	}
	return false
}

// CanSettle reports whether a ToolApproval in state s may move to state to: from Pending (or
// unset) to a final state, and no other move.
func (s ToolApprovalState) CanSettle(to ToolApprovalState) bool {
	return !s.Final() && to.Final()
}

// Settle moves ta to the final state to, with its condition True: reason, message, the object's
// generation as observedGeneration and now as the transition time. A move CanSettle refuses
// returns an error and changes nothing. Every writer of a state (kubectl gate, the confirmer)
// settles through here, so a state never comes without its condition.
func (ta *ToolApproval) Settle(to ToolApprovalState, reason, message string, now time.Time) error {
	if ta.Status.State.Final() {
		return errors.New(ta.SettledRefusal())
	}
	if !to.Final() {
		return fmt.Errorf("ToolApproval %s/%s cannot be settled in %s: a ToolApproval moves once, from Pending to a final state", ta.Namespace, ta.Name, to.OrPending())
	}
	ta.Status.State = to
	meta.SetStatusCondition(&ta.Status.Conditions, metav1.Condition{
		Type: to.ConditionType(), Status: metav1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: ta.Generation, LastTransitionTime: metav1.NewTime(now),
	})
	return nil
}

// SettledRefusal is why a ToolApproval in a final state takes no change: it is settled, by whom
// when an approver settled it, and a new call makes a new ToolApproval.
func (ta *ToolApproval) SettledRefusal() string {
	by := ""
	if d := ta.Status.Decision; d != nil && d.User != "" {
		by = " by " + d.User
	}
	return fmt.Sprintf("ToolApproval %s/%s is already %s%s: no change after a decision (a new call makes a new ToolApproval)", ta.Namespace, ta.Name, ta.Status.State, by)
}

// OrPending is s, with the unset state read as Pending (what the schema defaults it to).
func (s ToolApprovalState) OrPending() ToolApprovalState {
	if s == "" {
		return ApprovalPending
	}
	return s
}
