package confirm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/approvals"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/gate"
)

// Confirmer answers the pending tool calls of Managed Agents sessions through the gate.
type Confirmer struct {
	Client *anthropic.Client
	Gate   *gate.Gate
	// Deadline is how long an Ask verdict waits for a human before the call is denied.
	Deadline time.Duration
	Log      logr.Logger
	// Clock tells the time of the deadlines; nil is the real clock.
	Clock clock.PassiveClock
	// Decisions, when set, records every decision the confirmer makes (decisionlog).
	Decisions *decisionlog.Recorder
	// Metrics, when set, counts confirmations, API errors and held calls.
	Metrics *Metrics
	// Shard, when set, is this replica's part of the sessions: a session of another replica is
	// not answered (ErrNotOwned). Nil answers every session.
	Shard *Shard
	// Approvals, when set, is the human lane: every held call gets a ToolApproval, and its
	// answer (Approved, Denied) is sent before the deadline (approvalcalls.go). Nil holds Ask
	// verdicts until the deadline and denies them.
	Approvals *approvals.Store

	mu       sync.Mutex
	sessions map[string]*sessionState
	held     map[string]int // Ask verdicts waiting, per session
	agents   agentCache     // the agent of each session, for the rules' caller (identity.go)
}

// sessionState serializes the answering of one session and remembers which of its calls
// are answered, so a call seen on the stream is answered without listing the history again.
// The history stays the authority: every list pass rebuilds the set from the confirmations it
// shows, so a restart, another replica or a human answering are all seen.
type sessionState struct {
	mu       sync.Mutex
	answered map[string]bool
	// held are the Ask verdicts being held, by tool-use id.
	held map[string]*hold
	// checked are answered calls whose ToolApproval no longer needs a look (settleAnswered).
	checked map[string]bool
	// expiredSent are the calls this process denied at their deadline.
	expiredSent map[string]bool
}

// Outcome of answering one session.
type Outcome struct {
	// Confirmed are the calls answered by this pass; Held are Ask verdicts still waiting.
	Confirmed, Held int
	// NextDeadline is the earliest moment a held call must be denied; zero when none is held.
	NextDeadline time.Time
}

// pendingPermission reports whether a tool use waits for a confirmation: evaluated_permission
// ask, or a value this confirmer does not recognise (the server may add some). allow, deny and
// an absent value need no answer.
func pendingPermission(p string) bool {
	switch p {
	case "allow", "deny", "":
		return false
	}
	return true
}

// AnswerSession lists a session's tool uses and confirmations and answers every pending call
// exactly once: already-answered calls are re-derived from the listed confirmations, so list,
// stream and webhook triggers, several replicas, and restarts do not confirm twice.
// agent.custom_tool_use is never confirmed. A session of another replica is left alone:
// ErrNotOwned.
func (c *Confirmer) AnswerSession(ctx context.Context, sessionID string) (Outcome, error) {
	release, owned := c.Shard.acquire(sessionID)
	if !owned {
		return Outcome{}, ErrNotOwned
	}
	defer release()
	st := c.state(sessionID)
	st.mu.Lock()
	defer st.mu.Unlock()

	events, err := c.Client.ListEvents(ctx, sessionID, anthropic.ListEventsParams{
		Types: []string{anthropic.TypeToolUse, anthropic.TypeMCPToolUse, anthropic.TypeToolConfirmation},
		Limit: 1000,
	})
	if err != nil {
		c.countAPIError(err)
		return Outcome{}, err
	}
	confs := map[string]anthropic.Event{}
	for _, e := range events {
		if e.Type == anthropic.TypeToolConfirmation {
			st.answered[e.ToolUseID] = true
			delete(st.held, e.ToolUseID)
			confs[e.ToolUseID] = e
		}
	}
	if c.Approvals != nil {
		for _, e := range events {
			if conf, ok := confs[e.ID]; ok && (e.Type == anthropic.TypeToolUse || e.Type == anthropic.TypeMCPToolUse) && pendingPermission(e.EvaluatedPermission) {
				c.settleAnswered(ctx, sessionID, st, e, conf)
			}
		}
	}
	confirmed := 0
	for _, e := range events {
		ok, err := c.consider(ctx, sessionID, st, e)
		if ok {
			confirmed++
		}
		if err != nil {
			out := st.outcome()
			out.Confirmed = confirmed
			return out, err
		}
	}
	out := st.outcome()
	out.Confirmed = confirmed
	c.setHeld(sessionID, out.Held)
	return out, nil
}

// AnswerEvent handles one event seen on the stream: a pending tool use is answered at once,
// a confirmation is remembered. It reports whether the event needs a full pass instead: a
// requires-action idle naming a call this replica has not seen. A session of another replica
// is left alone: ErrNotOwned.
func (c *Confirmer) AnswerEvent(ctx context.Context, sessionID string, e anthropic.Event) (needList bool, out Outcome, err error) {
	release, owned := c.Shard.acquire(sessionID)
	if !owned {
		return false, Outcome{}, ErrNotOwned
	}
	defer release()
	st := c.state(sessionID)
	st.mu.Lock()
	defer st.mu.Unlock()
	switch e.Type {
	case anthropic.TypeToolConfirmation:
		st.answered[e.ToolUseID] = true
		if h := st.held[e.ToolUseID]; h != nil {
			delete(st.held, e.ToolUseID)
			if c.Approvals != nil {
				c.settleAnswered(ctx, sessionID, st, anthropic.Event{ID: e.ToolUseID, Type: anthropic.TypeToolUse, Name: h.tool}, e)
			}
		}
	case anthropic.TypeToolUse, anthropic.TypeMCPToolUse:
		var ok bool
		if ok, err = c.consider(ctx, sessionID, st, e); ok {
			out.Confirmed = 1
		}
	case anthropic.TypeStatusIdle:
		if e.StopReason != nil && e.StopReason.Type == "requires_action" {
			for _, id := range e.StopReason.EventIDs {
				if _, held := st.held[id]; !st.answered[id] && !held {
					needList = true // possibly a call we never saw, or a custom tool use: list to know
				}
			}
		}
	}
	confirmed := out.Confirmed
	out = st.outcome()
	out.Confirmed = confirmed
	c.setHeld(sessionID, out.Held)
	return needList, out, err
}

// consider answers e if it is a pending tool use not answered yet, and reports whether this
// call confirmed it; st.mu is held. A call is decided once per process: an Ask verdict is
// held, and from then on only its ToolApproval or its deadline answers it (resolveHold).
func (c *Confirmer) consider(ctx context.Context, sessionID string, st *sessionState, e anthropic.Event) (bool, error) {
	if (e.Type != anthropic.TypeToolUse && e.Type != anthropic.TypeMCPToolUse) || st.answered[e.ID] || !pendingPermission(e.EvaluatedPermission) {
		return false, nil
	}
	h := st.held[e.ID]
	if h == nil {
		conf, nh, err := c.decideCall(ctx, sessionID, e)
		if err != nil {
			return false, err
		}
		if nh == nil {
			return c.confirm(ctx, sessionID, st, conf, nil, "")
		}
		st.held[e.ID] = nh
		h = nh
	}
	return c.resolveHold(ctx, sessionID, st, e.ID, h)
}

func (st *sessionState) outcome() Outcome {
	var out Outcome
	for _, h := range st.held {
		out.Held++
		next := h.deadline
		if h.retryAt.After(next) { // held past its deadline until Expired is recorded
			next = h.retryAt
		}
		if out.NextDeadline.IsZero() || next.Before(out.NextDeadline) {
			out.NextDeadline = next
		}
	}
	return out
}

func (c *Confirmer) state(id string) *sessionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions == nil {
		c.sessions = map[string]*sessionState{}
	}
	st := c.sessions[id]
	if st == nil {
		st = &sessionState{answered: map[string]bool{}, held: map[string]*hold{}, checked: map[string]bool{}, expiredSent: map[string]bool{}}
		c.sessions[id] = st
	}
	return st
}

// Forget drops the per-session state of a session that ended.
func (c *Confirmer) Forget(id string) {
	c.mu.Lock()
	delete(c.sessions, id)
	c.mu.Unlock()
	c.setHeld(id, 0)
}

func (c *Confirmer) setHeld(id string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = map[string]int{}
	}
	if n == 0 {
		delete(c.held, id)
	} else {
		c.held[id] = n
	}
	if c.Metrics != nil {
		total := 0
		for _, v := range c.held {
			total += v
		}
		c.Metrics.PendingHuman.Set(float64(total))
	}
}

func (c *Confirmer) countAPIError(err error) {
	if c.Metrics == nil {
		return
	}
	status := 0
	var ae *anthropic.APIError
	if errors.As(err, &ae) {
		status = ae.Status
	}
	c.Metrics.APIErrors.WithLabelValues(strconv.Itoa(status)).Inc()
}

func (c *Confirmer) countConfirmation(result string) {
	if c.Metrics != nil {
		c.Metrics.Confirmations.WithLabelValues(result).Inc()
	}
}

// decideCall decides one pending call: Allow and Block give the confirmation to send; Ask
// gives a hold until the deadline, measured from the call's processed_at so a restart does
// not extend it, with the ToolApproval to create when the human lane is on.
func (c *Confirmer) decideCall(ctx context.Context, sessionID string, e anthropic.Event) (anthropic.ToolConfirmation, *hold, error) {
	caller, err := c.callerOf(ctx, sessionID)
	if err != nil {
		return anthropic.ToolConfirmation{}, nil, err
	}
	call := &gate.Call{Tool: e.Name, Server: e.MCPServerName, Surface: gate.SurfaceManagedAgents, Session: sessionID, Caller: caller}
	var g decisionlog.Gate = c.Gate
	if e.Type == anthropic.TypeMCPToolUse && e.MCPServerName == "" {
		// An MCP call that names no server would be judged as the built-in tool of its name.
		g = decisionlog.Refusal(gate.Refuse(gate.CodeInputInvalid, "an MCP tool call names no MCP server"))
	}
	d := c.Decisions.EvaluateRaw(g, call, e.Input, decisionlog.Origin{ToolUseID: e.ID})
	switch d.Verdict {
	case gate.Allow:
		return anthropic.Confirm(e.ID, true, ""), nil, nil
	case gate.Block:
		return anthropic.Confirm(e.ID, false, d.Message), nil, nil
	}
	// Ask: a human answers in the meantime, or the deadline denies.
	deadline := c.callDeadline(e)
	tool := gate.CanonicalToolName(e.Name, e.MCPServerName)
	h := &hold{deadline: deadline, reason: d.Reason, tool: tool}
	if a := c.Approvals; a != nil {
		h.name = a.Name(gatev1.SurfaceManagedAgents, sessionID, e.ID, tool, e.Input)
		h.req = &approvals.Request{Surface: gatev1.SurfaceManagedAgents, Session: sessionID, Agent: caller.Agent, ToolUseID: e.ID, Tool: tool,
			Decision: d, RawInput: e.Input, ExpiresAt: deadline}
	}
	return anthropic.ToolConfirmation{}, h, nil
}

// confirm sends one confirmation and records it; ta and outcome, when set, are the approval
// it answers and the Event to record on it. It reports whether the call is answered now.
func (c *Confirmer) confirm(ctx context.Context, sessionID string, st *sessionState, conf anthropic.ToolConfirmation, ta *gatev1.ToolApproval, outcome string) (bool, error) {
	id := conf.ToolUseID
	if err := c.Client.SendEvents(ctx, sessionID, conf); err != nil {
		c.countAPIError(err)
		if anthropic.IsFatal4xx(err) && c.alreadyAnswered(ctx, sessionID, id) {
			// Another replica or a human answered first: the call is done.
			c.countConfirmation("already_answered")
			st.answered[id] = true
			delete(st.held, id)
			return true, nil
		}
		c.countConfirmation("error")
		return false, fmt.Errorf("confirming %s in %s: %w", id, sessionID, err)
	}
	st.answered[id] = true
	delete(st.held, id)
	c.countConfirmation(conf.Result)
	c.Log.V(1).Info("confirmed tool use", "session", sessionID, "toolUse", id, "result", conf.Result)
	if ta != nil && outcome != "" {
		c.Approvals.Outcome(ta, outcome, fmt.Sprintf("sent %s to session %s for tool use %s", conf.Result, sessionID, id))
	}
	return true, nil
}

// alreadyAnswered re-lists the session's confirmations and reports whether one names the call.
func (c *Confirmer) alreadyAnswered(ctx context.Context, sessionID, toolUseID string) bool {
	evs, err := c.Client.ListEvents(ctx, sessionID, anthropic.ListEventsParams{Types: []string{anthropic.TypeToolConfirmation}, Limit: 1000})
	if err != nil {
		return false
	}
	for _, e := range evs {
		if e.ToolUseID == toolUseID {
			return true
		}
	}
	return false
}

func (c *Confirmer) now() time.Time {
	if c.Clock != nil {
		return c.Clock.Now()
	}
	return time.Now()
}
