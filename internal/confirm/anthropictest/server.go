// Package anthropictest is an in-process fake of the Managed Agents Sessions API for tests,
// the demo and benchmarks, faithful to specs/managed-agents-wire.md: the paths and headers it
// requires, PageCursor pagination with types[] filtering and order, the SSE stream (event name
// equal to the payload's type, ping frames), requires_action bookkeeping, and the error
// envelope. It injects faults on request and records every request.
package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Required on every request.
const (
	BetaHeader    = "managed-agents-2026-04-01"
	VersionHeader = "2026-10-21"
)

// Request is one recorded request.
type Request struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   string
}

// Fault is a failure injected into the next matching requests.
type Fault struct {
	// Method and PathSuffix select requests ("" matches all).
	Method, PathSuffix string
	// Status is answered instead of the real response (5xx, 429 ...).
	Status int
	// RetryAfter, when set, is sent as retry-after (seconds).
	RetryAfter string
	// Delay slows the response down before answering.
	Delay time.Duration
	// Times is how many requests it applies to; 0 means once.
	Times int
}

// Server is the fake. Create it with New.
type Server struct {
	*httptest.Server
	APIKey string
	// PingInterval is how often the stream sends `event: ping`.
	PingInterval time.Duration

	mu        sync.Mutex
	sessions  map[string]*session
	order     []string
	requests  []Request
	faults    []*Fault
	cutStream int  // cut the next stream after this many bytes of events (0: no cut)
	duplicate bool // send every streamed event twice
	seq       int
	clock     func() time.Time
}

type session struct {
	id, agentID, status string
	events              []map[string]any
	pending             []string // tool-use ids awaiting an answer, in order
	threadOf            map[string]string
	subs                map[chan map[string]any]struct{}
}

// New starts a fake on loopback that accepts the given API key.
func New(apiKey string) *Server {
	s := &Server{APIKey: apiKey, PingInterval: 15 * time.Second, sessions: map[string]*session{}, clock: time.Now}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Requests returns a copy of the recorded requests.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Inject queues a fault.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Times == 0 {
		f.Times = 1
	}
	s.faults = append(s.faults, &f)
}

// CutNextStream makes the next stream end after n bytes of event frames, in the middle of a
// frame if that is where n falls.
func (s *Server) CutNextStream(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cutStream = n
}

// DuplicateStreamEvents makes the stream send every event twice.
func (s *Server) DuplicateStreamEvents(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.duplicate = on
}

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

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: string(body)})
	fault := s.takeFaultLocked(r)
	s.mu.Unlock()

	if fault != nil {
		if fault.Delay > 0 {
			select {
			case <-time.After(fault.Delay):
			case <-r.Context().Done():
				return
			}
		}
		if fault.Status != 0 {
			if fault.RetryAfter != "" {
				w.Header().Set("retry-after", fault.RetryAfter)
			}
			errorResponse(w, fault.Status, errorType(fault.Status), "injected fault")
			return
		}
	}
	switch {
	case r.Header.Get("Authorization") != "Bearer "+s.APIKey:
		errorResponse(w, 401, "authentication_error", "invalid x-api-key")
		return
	case r.Header.Get("anthropic-beta") != BetaHeader:
		errorResponse(w, 400, "invalid_request_error", "the managed-agents beta header is required")
		return
	case r.Header.Get("anthropic-version") != VersionHeader:
		errorResponse(w, 400, "invalid_request_error", "unsupported anthropic-version")
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "v1" && parts[1] == "sessions":
		s.listSessions(w, r)
	case r.Method == http.MethodGet && len(parts) == 3 && parts[1] == "sessions":
		s.getSession(w, parts[2])
	case r.Method == http.MethodGet && len(parts) == 4 && parts[3] == "events":
		s.listEvents(w, r, parts[2])
	case r.Method == http.MethodPost && len(parts) == 4 && parts[3] == "events":
		s.sendEvents(w, parts[2], body)
	case r.Method == http.MethodGet && len(parts) == 5 && parts[3] == "events" && parts[4] == "stream":
		s.stream(w, r, parts[2])
	default:
		errorResponse(w, 404, "not_found_error", "no such route: "+r.Method+" "+r.URL.Path)
	}
}

func (s *Server) takeFaultLocked(r *http.Request) *Fault {
	for i, f := range s.faults {
		if (f.Method == "" || f.Method == r.Method) && strings.HasSuffix(r.URL.Path, f.PathSuffix) {
			f.Times--
			if f.Times <= 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
			return f
		}
	}
	return nil
}

func errorType(status int) string {
	switch {
	case status == 429:
		return "rate_limit_error"
	case status == 529:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	case status == 404:
		return "not_found_error"
	case status == 409:
		return "conflict_error"
	default:
		return "invalid_request_error"
	}
}

func errorResponse(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_fake")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}, "request_id": "req_fake"})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// paginate cuts items at the page cursor (an offset) and the limit (default 20, as small
// pages exercise the client's paging).
func paginate[T any](r *http.Request, items []T) ([]T, *string) {
	q := r.URL.Query()
	off, _ := strconv.Atoi(q.Get("page"))
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 {
		limit = 20
	}
	if off > len(items) {
		off = len(items)
	}
	end := min(off+limit, len(items))
	if end < len(items) {
		next := strconv.Itoa(end)
		return items[off:end], &next
	}
	return items[off:end], nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	var out []map[string]any
	for _, id := range s.order {
		ss := s.sessions[id]
		if a := q.Get("agent_id"); a != "" && ss.agentID != a {
			continue
		}
		if st := q["statuses[]"]; len(st) > 0 && !slices.Contains(st, ss.status) {
			continue
		}
		out = append(out, sessionObject(ss))
	}
	s.mu.Unlock()
	data, next := paginate(r, out)
	writeJSON(w, map[string]any{"data": nonNil(data), "next_page": next, "prev_page": nil})
}

func sessionObject(ss *session) map[string]any {
	return map[string]any{"id": ss.id, "type": "session", "status": ss.status, "archived_at": nil, "agent": map[string]any{"id": ss.agentID}}
}

func (s *Server) getSession(w http.ResponseWriter, id string) {
	s.mu.Lock()
	ss, ok := s.sessions[id]
	var obj map[string]any
	if ok {
		obj = sessionObject(ss)
	}
	s.mu.Unlock()
	if !ok {
		errorResponse(w, 404, "not_found_error", "session not found")
		return
	}
	writeJSON(w, obj)
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, id string) {
	q := r.URL.Query()
	s.mu.Lock()
	ss, ok := s.sessions[id]
	var evs []map[string]any
	if ok {
		types := q["types[]"]
		for _, e := range ss.events {
			if len(types) == 0 || slices.Contains(types, e["type"].(string)) {
				evs = append(evs, e)
			}
		}
	}
	s.mu.Unlock()
	if !ok {
		errorResponse(w, 404, "not_found_error", "session not found")
		return
	}
	if q.Get("order") == "desc" {
		slices.Reverse(evs)
	}
	data, next := paginate(r, evs)
	writeJSON(w, map[string]any{"data": nonNil(data), "next_page": next})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (s *Server) sendEvents(w http.ResponseWriter, id string, body []byte) {
	var req struct {
		Events []map[string]any `json:"events"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Events) == 0 {
		errorResponse(w, 400, "invalid_request_error", "body must be {\"events\": [...]}")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[id]
	if !ok {
		errorResponse(w, 404, "not_found_error", "session not found")
		return
	}
	// Validate all before applying any.
	for _, ev := range req.Events {
		if ev["type"] != "user.tool_confirmation" {
			errorResponse(w, 400, "invalid_request_error", fmt.Sprintf("the fake accepts only user.tool_confirmation, not %v", ev["type"]))
			return
		}
		for k := range ev {
			if !slices.Contains([]string{"type", "tool_use_id", "result", "deny_message"}, k) {
				errorResponse(w, 400, "invalid_request_error", "events.0."+k+": Extra inputs are not permitted")
				return
			}
		}
		tid, _ := ev["tool_use_id"].(string)
		result, _ := ev["result"].(string)
		if result != "allow" && result != "deny" {
			errorResponse(w, 400, "invalid_request_error", "result must be allow or deny")
			return
		}
		if _, has := ev["deny_message"]; has && result == "allow" && ev["deny_message"] != nil {
			errorResponse(w, 400, "invalid_request_error", "deny_message is only permitted with result deny")
			return
		}
		if !slices.Contains(ss.pending, tid) {
			errorResponse(w, 400, "invalid_request_error", fmt.Sprintf("tool_use_id %s is not awaiting confirmation", tid))
			return
		}
	}
	var echoed []map[string]any
	for _, ev := range req.Events {
		tid := ev["tool_use_id"].(string)
		out := map[string]any{"type": "user.tool_confirmation", "tool_use_id": tid, "result": ev["result"]}
		if dm, ok := ev["deny_message"]; ok {
			out["deny_message"] = dm
		}
		if th := ss.threadOf[tid]; th != "" {
			out["session_thread_id"] = th
		}
		s.appendLocked(ss, out)
		ss.pending = slices.DeleteFunc(ss.pending, func(p string) bool { return p == tid })
		echoed = append(echoed, out)
	}
	if len(ss.pending) > 0 {
		s.idleIfWaitingLocked(ss)
	} else {
		ss.status = "running"
		s.appendLocked(ss, map[string]any{"type": "session.status_running"})
	}
	writeJSON(w, map[string]any{"data": echoed})
}

// stream sends the session's events from the moment of connection (no replay of history),
// pings, and ends after session.deleted or when the client leaves.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	ss, ok := s.sessions[id]
	if !ok {
		s.mu.Unlock()
		errorResponse(w, 404, "not_found_error", "session not found")
		return
	}
	ch := make(chan map[string]any, 256)
	ss.subs[ch] = struct{}{}
	cut, dup := s.cutStream, s.duplicate
	s.cutStream = 0
	ping := s.PingInterval
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(ss.subs, ch)
		s.mu.Unlock()
	}()

	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	flusher := w.(http.Flusher)
	flusher.Flush()
	ticker := time.NewTicker(ping)
	defer ticker.Stop()
	sent := 0
	write := func(frame string) bool {
		if cut > 0 && sent+len(frame) > cut {
			io.WriteString(w, frame[:cut-sent])
			flusher.Flush()
			return false // the connection is cut mid-frame
		}
		sent += len(frame)
		io.WriteString(w, frame)
		flusher.Flush()
		return true
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ticker.C:
			io.WriteString(w, "event: ping\ndata: {\"type\":\"ping\"}\n\n")
			flusher.Flush()
		case ev := <-ch:
			b, _ := json.Marshal(ev)
			frame := "event: " + ev["type"].(string) + "\ndata: " + string(b) + "\n\n"
			if !write(frame) || (dup && !write(frame)) {
				return
			}
			if ev["type"] == "session.deleted" {
				return
			}
		}
	}
}
