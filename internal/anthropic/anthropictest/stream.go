package anthropictest

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// stream serves a session's event stream: every event appended from now on as a frame named by
// its type, pings, and ends after session.deleted or when the client leaves.
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
			// The connection is cut mid-frame whether or not this partial write succeeds.
			_, _ = io.WriteString(w, frame[:cut-sent])
			flusher.Flush()
			return false
		}
		sent += len(frame)
		if _, err := io.WriteString(w, frame); err != nil {
			return false // the client left
		}
		flusher.Flush()
		return true
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ticker.C:
			if _, err := io.WriteString(w, "event: ping\ndata: {\"type\":\"ping\"}\n\n"); err != nil {
				return // the client left
			}
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
