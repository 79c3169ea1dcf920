package anthropic

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
)

// Event is a session event as listed or streamed. Only the fields the confirmer reads are
// decoded; Raw keeps the whole event.
type Event struct {
	ID   string `json:"id"`
	Type string `json:"type"`

	// agent.tool_use, agent.mcp_tool_use, agent.custom_tool_use
	Name                string          `json:"name,omitempty"`
	Input               json.RawMessage `json:"input,omitempty"`
	MCPServerName       string          `json:"mcp_server_name,omitempty"`
	EvaluatedPermission string          `json:"evaluated_permission,omitempty"`
	Evaluation          json.RawMessage `json:"evaluation,omitempty"`
	SessionThreadID     *string         `json:"session_thread_id,omitempty"`

	// user.tool_confirmation
	ToolUseID   string  `json:"tool_use_id,omitempty"`
	Result      string  `json:"result,omitempty"`
	DenyMessage *string `json:"deny_message,omitempty"`

	// session.status_idle
	StopReason *StopReason `json:"stop_reason,omitempty"`

	ProcessedAt *string `json:"processed_at,omitempty"`

	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the raw event beside the decoded fields.
func (e *Event) UnmarshalJSON(b []byte) error {
	type plain Event
	if err := json.Unmarshal(b, (*plain)(e)); err != nil {
		return err
	}
	e.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// StopReason is session.status_idle's stop_reason; EventIDs is set for requires_action.
type StopReason struct {
	Type     string   `json:"type"`
	EventIDs []string `json:"event_ids,omitempty"`
}

// Event types the confirmer handles.
const (
	TypeToolUse          = "agent.tool_use"
	TypeMCPToolUse       = "agent.mcp_tool_use"
	TypeCustomToolUse    = "agent.custom_tool_use"
	TypeToolConfirmation = "user.tool_confirmation"
	TypeStatusIdle       = "session.status_idle"
	TypeStatusTerminated = "session.status_terminated"
	TypeDeleted          = "session.deleted"
)

// Session is the part of a session object the confirmer reads.
type Session struct {
	ID         string  `json:"id"`
	Type       string  `json:"type"`
	Status     string  `json:"status"`
	ArchivedAt *string `json:"archived_at"`
	// Agent is the snapshot of the agent the session runs; only its id is read.
	Agent *SessionAgent `json:"agent,omitempty"`
}

// SessionAgent is the part of a session's agent snapshot the confirmer reads.
type SessionAgent struct {
	ID string `json:"id"`
}

// ListEventsParams are the list parameters the confirmer uses.
type ListEventsParams struct {
	Types []string
	Order string // asc (the API's default) or desc
	Limit int    // per page; 0 leaves the API's default
}

// maxPages bounds a listing, so a server that keeps returning next_page cannot loop us forever.
const maxPages = 10000

// ListEvents lists a session's events across all pages.
func (c *Client) ListEvents(ctx context.Context, sessionID string, p ListEventsParams) ([]Event, error) {
	seg, err := sessionSegment(sessionID)
	if err != nil {
		return nil, err
	}
	var q query
	if p.Limit > 0 {
		q = q.add("limit", strconv.Itoa(p.Limit))
	}
	if p.Order != "" {
		q = q.add("order", p.Order)
	}
	q = q.addAll("types", p.Types)
	return listAll[Event](ctx, c, "/v1/sessions/"+seg+"/events", q, maxPages)
}

// ToolConfirmation is the user.tool_confirmation param. It has no session_thread_id: the
// server routes it by tool_use_id.
type ToolConfirmation struct {
	Type        string  `json:"type"`
	ToolUseID   string  `json:"tool_use_id"`
	Result      string  `json:"result"`
	DenyMessage *string `json:"deny_message,omitempty"`
}

// Confirm builds the confirmation of one tool use: allow, or deny with a message.
func Confirm(toolUseID string, allow bool, denyMessage string) ToolConfirmation {
	c := ToolConfirmation{Type: TypeToolConfirmation, ToolUseID: toolUseID, Result: "allow"}
	if !allow {
		c.Result = "deny"
		if denyMessage != "" {
			c.DenyMessage = &denyMessage
		}
	}
	return c
}

// SendEvents posts events to a session: {"events": [...]}.
func (c *Client) SendEvents(ctx context.Context, sessionID string, events ...any) error {
	if len(events) == 0 {
		return errEmpty
	}
	seg, err := sessionSegment(sessionID)
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]any{"events": events})
	if err != nil {
		return err
	}
	resp, err := c.send(ctx, http.MethodPost, c.endpoint("/v1/sessions/"+seg+"/events", nil), body)
	if err != nil {
		return err
	}
	var out struct {
		Data []json.RawMessage `json:"data"`
	}
	return decodeBody(resp, &out)
}

// ListSessionsParams filter the sessions list.
type ListSessionsParams struct {
	AgentID  string
	Statuses []string
	Limit    int
}

// ListSessions lists sessions across all pages.
func (c *Client) ListSessions(ctx context.Context, p ListSessionsParams) ([]Session, error) {
	var q query
	if p.Limit > 0 {
		q = q.add("limit", strconv.Itoa(p.Limit))
	}
	if p.AgentID != "" {
		q = q.add("agent_id", p.AgentID)
	}
	q = q.addAll("statuses", p.Statuses)
	return listAll[Session](ctx, c, "/v1/sessions", q, maxPages)
}

// GetSession fetches one session.
func (c *Client) GetSession(ctx context.Context, sessionID string) (*Session, error) {
	return getOne[Session](ctx, c, "/v1/sessions", "session_id", sessionID)
}
