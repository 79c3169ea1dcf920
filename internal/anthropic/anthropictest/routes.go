package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The REST routes of the fake: request checks, faults, lists with pagination, confirmations.

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	s.mu.Lock()
	if !s.noLog {
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Proto: r.Proto, Header: r.Header.Clone(), Body: string(body)})
	}
	fault := s.takeFaultLocked(r)
	s.mu.Unlock()

	if injectFault(w, r, fault) || !checkHeaders(w, r, s.APIKey) {
		return
	}
	s.route(w, r, body)
}

// injectFault delays the request and answers it with the fault's error, if the fault asks for
// them; it reports whether the request is done (answered, or the client left during the delay).
func injectFault(w http.ResponseWriter, r *http.Request, fault *Fault) bool {
	if fault == nil {
		return false
	}
	if fault.Delay > 0 {
		select {
		case <-time.After(fault.Delay):
		case <-r.Context().Done():
			return true
		}
	}
	if fault.Status == 0 {
		return false
	}
	if fault.RetryAfter != "" {
		w.Header().Set("retry-after", fault.RetryAfter)
	}
	errorResponse(w, fault.Status, errorType(fault.Status), "injected fault")
	return true
}

// checkHeaders answers a request without the API key, beta header or API version the real
// API requires with the real API's error, and reports whether the request may go on.
func checkHeaders(w http.ResponseWriter, r *http.Request, apiKey string) bool {
	switch {
	case r.Header.Get("Authorization") != "Bearer "+apiKey:
		errorResponse(w, 401, "authentication_error", "invalid x-api-key")
	case r.Header.Get("anthropic-beta") != BetaHeader:
		errorResponse(w, 400, "invalid_request_error", "the managed-agents beta header is required")
	case r.Header.Get("anthropic-version") != VersionHeader:
		errorResponse(w, 400, "invalid_request_error", "unsupported anthropic-version")
	default:
		return true
	}
	return false
}

// route dispatches a checked request to its handler.
func (s *Server) route(w http.ResponseWriter, r *http.Request, body []byte) {
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
		if !s.agentRoute(w, r, parts) {
			errorResponse(w, 404, "not_found_error", "no such route: "+r.Method+" "+r.URL.Path)
		}
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
	// The status is sent; a body that fails to encode or write means the client left.
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}, "request_id": "req_fake"})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	// The fake encodes only maps of JSON values, so an error here means the client left.
	_ = json.NewEncoder(w).Encode(v)
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

// answeredLocked reports whether a confirmation of the tool use is in the session's history.
func answeredLocked(ss *session, toolUseID string) bool {
	return slices.ContainsFunc(ss.events, func(e map[string]any) bool {
		return e["type"] == "user.tool_confirmation" && e["tool_use_id"] == toolUseID
	})
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
		again := s.acceptTwice && answeredLocked(ss, tid) // recorded, not refused (AcceptDuplicateConfirmations)
		if !slices.Contains(ss.pending, tid) && !again {
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
