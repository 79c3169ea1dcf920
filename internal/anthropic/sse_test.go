package anthropic

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readAll(t *testing.T, stream string) ([]sseMessage, error) {
	t.Helper()
	r := newSSEReader(strings.NewReader(stream))
	var out []sseMessage
	for {
		m, err := r.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

func TestSSEFraming(t *testing.T) {
	cases := []struct {
		name, stream string
		want         []sseMessage
	}{
		{"basic", "event: agent.tool_use\ndata: {\"id\":\"e1\"}\n\n", []sseMessage{{"agent.tool_use", `{"id":"e1"}`}}},
		{"multi-line data joins with newline", "event: x\ndata: a\ndata: b\n\n", []sseMessage{{"x", "a\nb"}}},
		{"CRLF", "event: x\r\ndata: 1\r\n\r\n", []sseMessage{{"x", "1"}}},
		{"lone CR", "event: x\rdata: 1\r\r", []sseMessage{{"x", "1"}}},
		{"BOM dropped", "\xef\xbb\xbfevent: x\ndata: 1\n\n", []sseMessage{{"x", "1"}}},
		{"comments ignored", ": keepalive\nevent: x\n: mid\ndata: 1\n\n", []sseMessage{{"x", "1"}}},
		{"only one space removed", "event:x\ndata:  two\n\n", []sseMessage{{"x", " two"}}},
		{"id and retry discarded", "id: 7\nretry: 100\nevent: x\ndata: 1\n\n", []sseMessage{{"x", "1"}}},
		{"line without colon is a field with empty value", "event: x\ndata\n\n", []sseMessage{{"x", ""}}},
		{"blank lines with nothing are skipped", "\n\n\nevent: x\ndata: 1\n\n\n", []sseMessage{{"x", "1"}}},
		{"flush at EOF", "event: x\ndata: 1", []sseMessage{{"x", "1"}}},
		{"nameless frame is marked", "data: 1\n\n", []sseMessage{{"\x00", "1"}}},
		{"colon inside the value", "event: x\ndata: {\"a\":\"b:c\"}\n\n", []sseMessage{{"x", `{"a":"b:c"}`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, tc.stream)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("message %d: got %q, want %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestSSEBounds(t *testing.T) {
	if _, err := readAll(t, "event: x\ndata: "+strings.Repeat("a", MaxSSELine+1)+"\n\n"); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("an oversized line: %v", err)
	}
	big := strings.Repeat("data: "+strings.Repeat("a", 1<<19)+"\n", 9)
	if _, err := readAll(t, "event: x\n"+big+"\n"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("an oversized event: %v", err)
	}
}

// streamServer serves one SSE body, then holds the connection open until the client leaves.
func streamServer(t *testing.T, body string, hold bool) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/sessions/sesn_1/events/stream" || r.Header.Get("Accept") != "application/json" {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if _, err := io.WriteString(w, body); err != nil {
			t.Errorf("writing the stream: %v", err)
			return
		}
		w.(http.Flusher).Flush()
		if hold {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	key := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(key, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(ClientOptions{BaseURL: srv.URL, APIKeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStreamDispatch(t *testing.T) {
	body := "event: ping\ndata: {}\n\n" +
		"data: {\"id\":\"nameless\"}\n\n" +
		"event: agent.message\ndata:\n\n" +
		"event: agent.tool_use\ndata: {\"id\":\"sevt_1\",\"type\":\"agent.tool_use\",\"name\":\"bash\",\"input\":{\"command\":\"ls\"},\"evaluated_permission\":\"ask\"}\n\n" +
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"},\"request_id\":null}\n\n"
	c := streamServer(t, body, false)
	s, err := c.StreamEvents(context.Background(), "sesn_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev, err := s.Next()
	if err != nil || ev.ID != "sevt_1" || ev.Name != "bash" || ev.EvaluatedPermission != "ask" {
		t.Fatalf("first event %+v %v: ping, nameless and empty frames must be skipped", ev, err)
	}
	_, err = s.Next()
	var ae *APIError
	if !errors.As(err, &ae) || ae.Type != "overloaded_error" || ae.Status != 0 {
		t.Fatalf("an error frame must be an APIError, got %v", err)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Fatalf("want EOF, got %v", err)
	}
}

func TestStreamIdleTimeout(t *testing.T) {
	c := streamServer(t, "event: ping\ndata: {}\n\n", true)
	s, err := c.StreamEvents(context.Background(), "sesn_1", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(); !errors.Is(err, ErrStreamIdle) {
		t.Fatalf("a silent stream must end with ErrStreamIdle, got %v", err)
	}
}

func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"event: agent.tool_use\ndata: {\"id\":\"e\"}\n\n",
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"x\"}}\n\n",
		"\r\r\n:\xef\xbb\xbfevent:\rdata\n\ndata: a\ndata: b",
		"event: ping\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stream string) {
		s := &Stream{reader: newSSEReader(strings.NewReader(stream)), cancel: func() {}}
		for range 1000 {
			if _, err := s.Next(); err != nil {
				return
			}
		}
		t.Fatal("1000 events from a fuzz input that cannot hold that many")
	})
}
