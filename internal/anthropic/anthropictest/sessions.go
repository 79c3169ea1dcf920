package anthropictest

import (
	"fmt"
	"slices"
	"time"
)

// ToolUse is a scripted tool call.
type ToolUse struct {
	ID   string // assigned when empty
	Type string // agent.tool_use (default), agent.mcp_tool_use or agent.custom_tool_use
	Name string
	// MCPServer is mcp_server_name, for agent.mcp_tool_use.
	MCPServer string
	Input     map[string]any
	// Permission is evaluated_permission; "" leaves the field out.
	Permission string
	// Evaluation is the evaluation object; nil leaves it out.
	Evaluation map[string]any
	// Thread sets session_thread_id: the call was copied from a subagent's thread.
	Thread string
}

// AddSession creates a session of an agent whose history holds the scripted calls. Calls that
// wait for the client (evaluated_permission ask or unrecognised, and custom tool uses) are
// listed in a closing session.status_idle with stop_reason requires_action. It returns the
// ids of the calls, in order.
func (s *Server) AddSession(id, agentID string, calls ...ToolUse) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := &session{id: id, agentID: agentID, status: "running", threadOf: map[string]string{}, subs: map[chan map[string]any]struct{}{}}
	s.sessions[id] = ss
	s.order = append(s.order, id)
	s.appendLocked(ss, map[string]any{"type": "session.status_running"})
	return s.addCallsLocked(ss, calls)
}

// AddCalls appends more calls to a session, as the agent would while it runs.
func (s *Server) AddCalls(id string, calls ...ToolUse) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[id]
	if ss.status == "idle" {
		ss.status = "running"
		s.appendLocked(ss, map[string]any{"type": "session.status_running"})
	}
	return s.addCallsLocked(ss, calls)
}

func (s *Server) addCallsLocked(ss *session, calls []ToolUse) []string {
	var ids []string
	for _, c := range calls {
		ev := map[string]any{"type": "agent.tool_use", "name": c.Name, "input": c.Input}
		if c.Type != "" {
			ev["type"] = c.Type
		}
		if c.Input == nil {
			ev["input"] = map[string]any{}
		}
		if c.ID != "" {
			ev["id"] = c.ID
		}
		if c.MCPServer != "" {
			ev["mcp_server_name"] = c.MCPServer
		}
		if c.Permission != "" {
			ev["evaluated_permission"] = c.Permission
		}
		if c.Evaluation != nil {
			ev["evaluation"] = c.Evaluation
		}
		if c.Thread != "" {
			ev["session_thread_id"] = c.Thread
		}
		id := s.appendLocked(ss, ev)
		ids = append(ids, id)
		if c.Thread != "" {
			ss.threadOf[id] = c.Thread
		}
		waits := c.Type == "agent.custom_tool_use" || (c.Permission != "allow" && c.Permission != "deny" && c.Permission != "")
		if waits {
			ss.pending = append(ss.pending, id)
		}
	}
	s.idleIfWaitingLocked(ss)
	return ids
}

func (s *Server) idleIfWaitingLocked(ss *session) {
	if len(ss.pending) == 0 {
		return
	}
	ss.status = "idle"
	s.appendLocked(ss, map[string]any{
		"type":         "session.status_idle",
		"stop_reason":  map[string]any{"type": "requires_action", "event_ids": slices.Clone(ss.pending)},
		"stop_details": nil,
	})
}

// Terminate ends a session.
func (s *Server) Terminate(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[id]
	ss.status = "terminated"
	s.appendLocked(ss, map[string]any{"type": "session.status_terminated"})
}

// Delete deletes a session: session.deleted ends its streams.
func (s *Server) Delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[id]
	ss.status = "terminated"
	s.appendLocked(ss, map[string]any{"type": "session.deleted"})
}

// Events returns a copy of a session's history.
func (s *Server) Events(id string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sessions[id].events)
}

// Confirmations returns the user.tool_confirmation events of a session.
func (s *Server) Confirmations(id string) []map[string]any {
	var out []map[string]any
	for _, e := range s.Events(id) {
		if e["type"] == "user.tool_confirmation" {
			out = append(out, e)
		}
	}
	return out
}

// Pending returns the tool-use ids a session still waits on.
func (s *Server) Pending(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sessions[id].pending)
}

func (s *Server) appendLocked(ss *session, ev map[string]any) string {
	s.seq++
	if _, ok := ev["id"]; !ok {
		ev["id"] = fmt.Sprintf("sevt_%06d", s.seq)
	}
	ev["processed_at"] = s.clock().UTC().Format(time.RFC3339Nano)
	ss.events = append(ss.events, ev)
	for ch := range ss.subs {
		select {
		case ch <- ev:
		default: // a subscriber that cannot keep up misses live events; it re-lists on reconnect
		}
	}
	return ev["id"].(string)
}
