package confirm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/intutic/gate-operator/internal/gate"
)

// Decider is the gate as the confirmer uses it.
type Decider interface {
	Decide(*gate.Call) gate.Decision
}

// Confirmer answers the pending tool calls of Managed Agents sessions through the gate.
type Confirmer struct {
	Client *Client
	Gate   Decider
	// Deadline is how long an Ask verdict waits for a human before the call is denied.
	Deadline time.Duration
	Log      logr.Logger
	// Now is replaced by tests.
	Now func() time.Time
	// Audit receives every decision the confirmer makes; nil logs only.
	Audit func(AuditRecord)

	mu       sync.Mutex
	sessions map[string]*sync.Mutex // one answering pass per session at a time
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
// agent.custom_tool_use is never confirmed.
func (c *Confirmer) AnswerSession(ctx context.Context, sessionID string) (Outcome, error) {
	lock := c.sessionLock(sessionID)
	lock.Lock()
	defer lock.Unlock()

	events, err := c.Client.ListEvents(ctx, sessionID, ListEventsParams{
		Types: []string{TypeToolUse, TypeMCPToolUse, TypeToolConfirmation},
		Limit: 1000,
	})
	if err != nil {
		return Outcome{}, err
	}
	answered := map[string]bool{}
	for _, e := range events {
		if e.Type == TypeToolConfirmation {
			answered[e.ToolUseID] = true
		}
	}
	var out Outcome
	seen := map[string]bool{}
	for _, e := range events {
		if (e.Type != TypeToolUse && e.Type != TypeMCPToolUse) || seen[e.ID] || answered[e.ID] || !pendingPermission(e.EvaluatedPermission) {
			continue
		}
		seen[e.ID] = true // a subagent's call can be listed twice; both copies share the id
		confirmed, deadline, err := c.answer(ctx, sessionID, e)
		if err != nil {
			return out, err
		}
		if confirmed {
			out.Confirmed++
		} else {
			out.Held++
			if out.NextDeadline.IsZero() || deadline.Before(out.NextDeadline) {
				out.NextDeadline = deadline
			}
		}
	}
	return out, nil
}

func (c *Confirmer) sessionLock(id string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions == nil {
		c.sessions = map[string]*sync.Mutex{}
	}
	l := c.sessions[id]
	if l == nil {
		l = &sync.Mutex{}
		c.sessions[id] = l
	}
	return l
}

// Forget drops the per-session state of a session that ended.
func (c *Confirmer) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sessions, id)
}

// answer decides one pending call and sends its confirmation, or holds an Ask until the
// deadline, measured from the call's processed_at so a restart does not extend it.
func (c *Confirmer) answer(ctx context.Context, sessionID string, e Event) (confirmed bool, deadline time.Time, err error) {
	var input any
	if len(e.Input) > 0 {
		if err := json.Unmarshal(e.Input, &input); err != nil {
			input = string(e.Input)
		}
	}
	call := &gate.Call{Tool: e.Name, Server: e.MCPServerName, Input: gate.RenderInput(input), Surface: gate.SurfaceManagedAgents, Session: sessionID}
	d := c.Gate.Decide(call)
	c.audit(sessionID, e, d)

	var conf ToolConfirmation
	switch d.Verdict {
	case gate.Allow:
		conf = Confirm(e.ID, true, "")
	case gate.Block:
		conf = Confirm(e.ID, false, d.Message)
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
		conf = Confirm(e.ID, false, fmt.Sprintf("%sno human approved this call within %s (%s)", gate.RefusalPrefix, c.Deadline, d.Reason))
	}
	if err := c.Client.SendEvents(ctx, sessionID, conf); err != nil {
		if IsFatal4xx(err) && c.alreadyAnswered(ctx, sessionID, e.ID) {
			// Another replica or a human answered first: the call is done.
			return true, time.Time{}, nil
		}
		return false, time.Time{}, fmt.Errorf("confirming %s in %s: %w", e.ID, sessionID, err)
	}
	c.Log.V(1).Info("confirmed tool use", "session", sessionID, "toolUse", e.ID, "result", conf.Result, "incident", d.IncidentID)
	return true, time.Time{}, nil
}

// alreadyAnswered re-lists the session's confirmations and reports whether one names the call.
func (c *Confirmer) alreadyAnswered(ctx context.Context, sessionID, toolUseID string) bool {
	evs, err := c.Client.ListEvents(ctx, sessionID, ListEventsParams{Types: []string{TypeToolConfirmation}, Limit: 1000})
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

// AuditRecord is what the audit log keeps of a decision: never the input, only its size and
// hash.
type AuditRecord struct {
	IncidentID, Surface, Tool, Verdict, Rule, Code, SnapshotDigest, Session, ToolUseID string
	InputBytes                                                                         int
	InputSHA256                                                                        string
}

func (c *Confirmer) audit(sessionID string, e Event, d gate.Decision) {
	sum := sha256.Sum256(e.Input)
	rec := AuditRecord{
		IncidentID: d.IncidentID, Surface: gate.SurfaceManagedAgents, Tool: gate.CanonicalToolName(e.Name, e.MCPServerName),
		Verdict: string(d.Verdict), Rule: d.Rule, Code: d.Code, SnapshotDigest: d.SnapshotDigest,
		Session: sessionID, ToolUseID: e.ID, InputBytes: len(e.Input), InputSHA256: hex.EncodeToString(sum[:]),
	}
	c.Log.Info("decision", "incidentId", rec.IncidentID, "surface", rec.Surface, "tool", rec.Tool, "verdict", rec.Verdict,
		"rule", rec.Rule, "code", rec.Code, "snapshotDigest", rec.SnapshotDigest, "session", rec.Session, "toolUseId", rec.ToolUseID,
		"inputBytes", rec.InputBytes, "inputSha256", rec.InputSHA256)
	if c.Audit != nil {
		c.Audit(rec)
	}
}
