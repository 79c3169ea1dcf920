package confirm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/gate"
)

// Confirmer answers the pending tool calls of Managed Agents sessions through the gate.
type Confirmer struct {
	Client *anthropic.Client
	Gate   Decider
	// Deadline is how long an Ask verdict waits for a human before the call is denied.
	Deadline time.Duration
	Log      logr.Logger
	// Now is replaced by tests.
	Now func() time.Time
	// Audit receives every decision the confirmer makes; nil logs only.
	Audit func(AuditRecord)
	// Metrics, when set, counts decisions, confirmations, API errors and held calls.
	Metrics *Metrics
	// Shard, when set, is this replica's part of the sessions: a session of another replica is
	// not answered (ErrNotOwned). Nil answers every session.
	Shard *Shard

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
	// deadlines of the Ask verdicts being held, by tool-use id.
	deadlines map[string]time.Time
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
	for _, e := range events {
		if e.Type == anthropic.TypeToolConfirmation {
			st.answered[e.ToolUseID] = true
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
		delete(st.deadlines, e.ToolUseID)
	case anthropic.TypeToolUse, anthropic.TypeMCPToolUse:
		var ok bool
		if ok, err = c.consider(ctx, sessionID, st, e); ok {
			out.Confirmed = 1
		}
	case anthropic.TypeStatusIdle:
		if e.StopReason != nil && e.StopReason.Type == "requires_action" {
			for _, id := range e.StopReason.EventIDs {
				if _, held := st.deadlines[id]; !st.answered[id] && !held {
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
// call confirmed it; st.mu is held.
func (c *Confirmer) consider(ctx context.Context, sessionID string, st *sessionState, e anthropic.Event) (bool, error) {
	if (e.Type != anthropic.TypeToolUse && e.Type != anthropic.TypeMCPToolUse) || st.answered[e.ID] || !pendingPermission(e.EvaluatedPermission) {
		return false, nil
	}
	if deadline, held := st.deadlines[e.ID]; held && c.now().Before(deadline) {
		return false, nil
	}
	confirmed, deadline, err := c.answer(ctx, sessionID, e)
	if err != nil {
		return false, err
	}
	if confirmed {
		st.answered[e.ID] = true
		delete(st.deadlines, e.ID)
	} else {
		st.deadlines[e.ID] = deadline
	}
	return confirmed, nil
}

func (st *sessionState) outcome() Outcome {
	var out Outcome
	for _, d := range st.deadlines {
		out.Held++
		if out.NextDeadline.IsZero() || d.Before(out.NextDeadline) {
			out.NextDeadline = d
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
		st = &sessionState{answered: map[string]bool{}, deadlines: map[string]time.Time{}}
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

// answer decides one pending call and sends its confirmation, or holds an Ask until the
// deadline, measured from the call's processed_at so a restart does not extend it.
func (c *Confirmer) answer(ctx context.Context, sessionID string, e anthropic.Event) (confirmed bool, deadline time.Time, err error) {
	caller, err := c.callerOf(ctx, sessionID)
	if err != nil {
		return false, time.Time{}, err
	}
	call := &gate.Call{Tool: e.Name, Server: e.MCPServerName, Surface: gate.SurfaceManagedAgents, Session: sessionID, Caller: caller}
	g := c.Gate
	if e.Type == anthropic.TypeMCPToolUse && e.MCPServerName == "" {
		// An MCP call that names no server would be judged as the built-in tool of its name.
		g = refused(gate.Refuse(gate.CodeInputInvalid, "an MCP tool call names no MCP server"))
	}
	d, rec := DecideRaw(g, c.Metrics, c.Log, call, e.Input, "toolUseId", e.ID)
	if c.Audit != nil {
		rec.ToolUseID = e.ID
		c.Audit(rec)
	}

	var conf anthropic.ToolConfirmation
	switch d.Verdict {
	case gate.Allow:
		conf = anthropic.Confirm(e.ID, true, "")
	case gate.Block:
		conf = anthropic.Confirm(e.ID, false, d.Message)
	default: // Ask: a human answers in the meantime, or the deadline denies
		deadline = c.now().Add(c.Deadline)
		if e.ProcessedAt != nil {
			if t, perr := time.Parse(time.RFC3339Nano, *e.ProcessedAt); perr == nil {
				deadline = t.Add(c.Deadline)
			}
		}
		if c.now().Before(deadline) {
			return false, deadline, nil
		}
		conf = anthropic.Confirm(e.ID, false, fmt.Sprintf("%sno human approved this call within %s (%s)", gate.RefusalPrefix, c.Deadline, d.Reason))
	}
	if err := c.Client.SendEvents(ctx, sessionID, conf); err != nil {
		c.countAPIError(err)
		if anthropic.IsFatal4xx(err) && c.alreadyAnswered(ctx, sessionID, e.ID) {
			// Another replica or a human answered first: the call is done.
			c.countConfirmation("already_answered")
			return true, time.Time{}, nil
		}
		c.countConfirmation("error")
		return false, time.Time{}, fmt.Errorf("confirming %s in %s: %w", e.ID, sessionID, err)
	}
	c.countConfirmation(conf.Result)
	c.Log.V(1).Info("confirmed tool use", "session", sessionID, "toolUse", e.ID, "result", conf.Result, "incident", d.IncidentID)
	return true, time.Time{}, nil
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
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
