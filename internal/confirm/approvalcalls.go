package confirm

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/approvals"
	"github.com/intutic/gate-operator/internal/gate"
)

// hold is a Managed Agents call the gate sent to a human.
type hold struct {
	deadline time.Time
	// reason is the rule's, for the refusal at the deadline; tool is the canonical tool name.
	reason, tool string
	// name is the call's ToolApproval and req what it says (nil without Approvals); created is
	// set once Ensure created or adopted it.
	name    string
	req     *approvals.Request
	created bool
	// retryAt, after the deadline, is when a call whose Expired could not be recorded yet is
	// looked at again.
	retryAt time.Time
}

// expiryMessage is the refusal of a call no human answered in time.
func (c *Confirmer) expiryMessage(h *hold) string {
	return fmt.Sprintf("%sno human approved this call within %s (%s)", gate.RefusalPrefix, c.Deadline, h.reason)
}

// resolveHold answers a held call from its ToolApproval, or denies it once its deadline has
// passed; st.mu is held. Before the deadline, an approval that cannot be created or read
// leaves the call held (retried by the next pass). At the deadline the call is denied once
// Expired is recorded: the API server's clock (the admission webhook's) measures the deadline
// for approvers and for Expired alike, so while it refuses Expired (its clock behind this one)
// or the approval cannot be read, a human can still answer and the call stays held, for at
// most approvals.ExpiryGrace. After that, or when there is no approval to record on (none
// created, or an object of its name that is not this call's), it is denied whatever the API
// server says, and Expired is written by a later pass when it can be (settleAnswered).
func (c *Confirmer) resolveHold(ctx context.Context, sessionID string, st *sessionState, id string, h *hold) (bool, error) {
	ta, readErr := c.approvalOf(ctx, sessionID, id, h)
	for range 2 { // a second round only for an answer that won the race against Expired
		switch approvals.AnswerOf(ta) {
		case approvals.Approved:
			return c.confirm(ctx, sessionID, st, anthropic.Confirm(id, true, ""), ta, approvals.EventAllowed)
		case approvals.Denied:
			return c.confirm(ctx, sessionID, st, anthropic.Confirm(id, false, approvals.DeniedMessage(ta)), ta, approvals.EventDenied)
		case approvals.Expired: // written by this replica or another, whose deny may not have been sent
			return c.confirm(ctx, sessionID, st, anthropic.Confirm(id, false, c.expiryMessage(h)), nil, "")
		}
		now := c.now()
		if now.Before(h.deadline) {
			return false, nil
		}
		graced := now.Before(h.deadline.Add(approvals.ExpiryGrace))
		if ta == nil {
			if readErr != nil && graced {
				h.retryAt = now.Add(expiryRetry)
				return false, nil
			}
			break
		}
		fresh, err := c.Approvals.Expire(ctx, ta)
		switch {
		case errors.Is(err, approvals.ErrSettled):
			ta = fresh
			if a := approvals.AnswerOf(ta); a == approvals.Approved || a == approvals.Denied {
				continue
			}
			ta = nil // final but not an answer to act on: deny
		case err != nil && graced:
			c.Log.Error(err, "the deadline passed and Expired is not recorded yet: the call stays held, and a human may still answer it", "session", sessionID, "toolUseId", id, "approval", h.name)
			h.retryAt = now.Add(expiryRetry)
			return false, nil
		case err != nil:
			c.Log.Error(err, "the deadline passed: denying the call without Expired recorded", "session", sessionID, "toolUseId", id, "approval", h.name)
			ta = nil
		default:
			ta = fresh
		}
		break
	}
	st.expiredSent[id] = true
	outcome := ""
	if ta != nil {
		outcome = approvals.EventExpired
	}
	return c.confirm(ctx, sessionID, st, anthropic.Confirm(id, false, c.expiryMessage(h)), ta, outcome)
}

// expiryRetry is how soon a call held past its deadline, Expired not recorded, is looked at again.
const expiryRetry = 5 * time.Second

// approvalOf creates the ToolApproval of a held call if that has not succeeded yet, and reads
// it; nil when there is none to act on (no human lane, not created, not this call's: an
// object of its name that differs from what the confirmer writes is never adopted). The error
// is a failure to read an approval that was created.
func (c *Confirmer) approvalOf(ctx context.Context, sessionID, id string, h *hold) (*gatev1.ToolApproval, error) {
	a := c.Approvals
	if a == nil || h.req == nil {
		return nil, nil
	}
	if !h.created {
		ta, err := a.Ensure(ctx, *h.req)
		if err != nil {
			c.Log.Error(err, "the call stays held until a ToolApproval exists or its deadline passes", "session", sessionID, "toolUseId", id)
			return nil, nil
		}
		h.created = true
		return ta, nil
	}
	ta, err := a.Get(ctx, h.name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		c.Log.Error(err, "reading the ToolApproval", "approval", h.name)
		return nil, err
	}
	if !a.Matches(ta, *h.req) {
		return nil, nil
	}
	return ta, nil
}

// settleAnswered records on a call's ToolApproval that the call was answered without it: by
// the runtime's own console first (AnsweredInRuntime), or by this confirmer's deny at the
// deadline when Expired could not be written then. conf is the call's confirmation; st.mu is
// held. A write that fails is retried by the next pass.
func (c *Confirmer) settleAnswered(ctx context.Context, sessionID string, st *sessionState, e, conf anthropic.Event) {
	a := c.Approvals
	if st.checked[e.ID] {
		return
	}
	name := a.Name(gatev1.SurfaceManagedAgents, sessionID, e.ID, gate.CanonicalToolName(e.Name, e.MCPServerName), e.Input)
	ta, err := a.Get(ctx, name)
	if err != nil || !a.TrustedObject(ta) || ta.Status.State.Final() {
		// Absent is settled once the call is past its deadline: before that, another replica's
		// approval may not have reached this cache yet.
		st.checked[e.ID] = err == nil || (apierrors.IsNotFound(err) && !c.now().Before(c.callDeadline(e)))
		return
	}
	state, reason, outcome, msg := gatev1.ApprovalAnsweredInRuntime, runtimeReason(conf.Result), approvals.EventAnsweredInRuntime,
		fmt.Sprintf("the runtime's own console answered %s before anyone answered here; the confirmer sent nothing", conf.Result)
	if st.expiredSent[e.ID] || !answeredBefore(conf, ta.Spec.ExpiresAt.Time) {
		state, reason, outcome, msg = gatev1.ApprovalExpired, gatev1.ReasonNoAnswer, approvals.EventExpired, fmt.Sprintf("no human approved this call within %s; it was denied", a.Deadline)
	}
	fresh, err := a.Settle(ctx, ta, state, reason, msg)
	switch {
	case errors.Is(err, approvals.ErrSettled):
		st.checked[e.ID] = true
	case err != nil:
		c.Log.Error(err, "recording how the call was answered", "approval", name, "state", state)
	default:
		st.checked[e.ID] = true
		a.Outcome(fresh, outcome, msg)
	}
}

// callDeadline is when a held call is denied: its processed_at plus the deadline (now, when it
// has none).
func (c *Confirmer) callDeadline(e anthropic.Event) time.Time {
	if e.ProcessedAt != nil {
		if t, err := time.Parse(time.RFC3339Nano, *e.ProcessedAt); err == nil {
			return t.Add(c.Deadline)
		}
	}
	return c.now().Add(c.Deadline)
}

// answeredBefore reports whether a confirmation was processed before t; one without a time
// counts as not.
func answeredBefore(conf anthropic.Event, t time.Time) bool {
	if conf.ProcessedAt == nil {
		return false
	}
	at, err := time.Parse(time.RFC3339Nano, *conf.ProcessedAt)
	return err == nil && at.Before(t)
}

// runtimeReason is the AnsweredInRuntime condition's reason for the console's result.
func runtimeReason(result string) string {
	switch result {
	case "allow":
		return gatev1.ReasonRuntimeAllow
	case "deny":
		return gatev1.ReasonRuntimeDeny
	}
	return gatev1.ReasonRuntimeAnswered
}

// AnswerApproval acts on a change of a Managed Agents ToolApproval, on the replica that owns
// its session: an answer is sent at once when the call is held here, and a call this replica
// has not seen yet is found by a pass over the session. It returns how long until the approval
// should be looked at again (its deadline), zero when never.
func (c *Confirmer) AnswerApproval(ctx context.Context, ta *gatev1.ToolApproval) (time.Duration, error) {
	session, id := ta.Spec.SessionID, ta.Spec.ToolUseID
	release, owned := c.Shard.acquire(session)
	if !owned {
		return 0, nil
	}
	st := c.state(session)
	st.mu.Lock()
	if st.answered[id] {
		st.mu.Unlock()
		release()
		return 0, nil
	}
	if h := st.held[id]; h != nil {
		_, err := c.resolveHold(ctx, session, st, id, h)
		var wait time.Duration
		if st.held[id] != nil {
			wait = max(h.deadline.Sub(c.now()), time.Second)
		}
		out := st.outcome()
		st.mu.Unlock()
		release()
		c.setHeld(session, out.Held)
		return wait, err
	}
	st.mu.Unlock()
	release()
	out, err := c.AnswerSession(ctx, session)
	switch {
	case errors.Is(err, ErrNotOwned):
		return 0, nil
	case anthropic.IsFatal4xx(err) && c.Approvals != nil:
		// The session is gone (deleted, or no longer this key's): its call can never be
		// answered. The approval waits for its deadline, then is recorded Expired.
		if wait := ta.Spec.ExpiresAt.Sub(c.now()); wait > 0 {
			c.Log.Error(err, "the session of a ToolApproval cannot be read; it expires at its deadline", "approval", ta.Name)
			return wait, nil
		}
		fresh, xerr := c.Approvals.Expire(ctx, ta)
		if xerr == nil {
			c.Approvals.Outcome(fresh, approvals.EventExpired, fmt.Sprintf("no human approved this call within %s, and its session %s can no longer be read", c.Deadline, session))
		} else if !errors.Is(xerr, approvals.ErrSettled) {
			return 0, xerr
		}
		return 0, nil
	}
	if out.Held > 0 {
		return max(out.NextDeadline.Sub(c.now()), time.Second), err
	}
	return 0, err
}
