package anthropic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const testKey = "sk-ant-test-0123456789abcdef"

// recorder is an httptest server whose handler answers from a script and records requests.
type recorder struct {
	mu       sync.Mutex
	requests []*http.Request
	bodies   []string
	respond  func(n int, r *http.Request) (int, http.Header, string)
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	n := len(rec.requests)
	rec.requests = append(rec.requests, r.Clone(context.Background()))
	rec.bodies = append(rec.bodies, string(body))
	rec.mu.Unlock()
	status, h, out := rec.respond(n, r)
	for k, vs := range h {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(status)
	// The tests assert what the client makes of the response, where a failed write shows.
	_, _ = io.WriteString(w, out)
}

func newTestClient(t *testing.T, rec *recorder, opts ClientOptions) (*Client, *[]time.Duration) {
	t.Helper()
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	keyPath := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(keyPath, []byte(testKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var slept []time.Duration
	clock := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	opts.BaseURL = srv.URL
	opts.APIKeyFile = keyPath
	opts.now = func() time.Time { return clock }
	opts.Sleep = func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		clock = clock.Add(d)
		return nil
	}
	opts.jitter = func() float64 { return 0 }
	c, err := NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, &slept
}

func TestHeadersAndQueryEncoding(t *testing.T) {
	rec := &recorder{respond: func(int, *http.Request) (int, http.Header, string) { return 200, nil, `{"data":[],"next_page":null}` }}
	c, _ := newTestClient(t, rec, ClientOptions{WorkspaceID: "wrkspc_1"})
	if _, err := c.ListEvents(context.Background(), "sesn_01", ListEventsParams{Types: []string{"agent.tool_use", "agent.mcp_tool_use"}, Order: "asc", Limit: 1000}); err != nil {
		t.Fatal(err)
	}
	r := rec.requests[0]
	if r.URL.Path != "/v1/sessions/sesn_01/events" {
		t.Errorf("path %s", r.URL.Path)
	}
	if r.URL.RawQuery != "limit=1000&order=asc&types%5B%5D=agent.tool_use&types%5B%5D=agent.mcp_tool_use" {
		t.Errorf("query %s", r.URL.RawQuery)
	}
	want := map[string]string{
		"Accept":                 "application/json",
		"Anthropic-Version":      "2026-10-21",
		"Anthropic-Beta":         "managed-agents-2026-04-01",
		"Authorization":          "Bearer " + testKey,
		"Anthropic-Workspace-Id": "wrkspc_1",
	}
	for k, v := range want {
		if got := r.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if r.Header.Get("Content-Type") != "" || r.Header.Get("X-Api-Key") != "" {
		t.Errorf("unexpected headers on a GET: %v", r.Header)
	}

	if err := c.SendEvents(context.Background(), "sesn_01", Confirm("sevt_1", false, "no")); err != nil {
		t.Fatal(err)
	}
	r = rec.requests[1]
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Anthropic-Beta") != BetaManaged {
		t.Errorf("POST headers %v", r.Header)
	}
	if rec.bodies[1] != `{"events":[{"type":"user.tool_confirmation","tool_use_id":"sevt_1","result":"deny","deny_message":"no"}]}` {
		t.Errorf("body %s", rec.bodies[1])
	}
	if err := c.SendEvents(context.Background(), "sesn_01", Confirm("sevt_2", true, "ignored")); err != nil {
		t.Fatal(err)
	}
	if rec.bodies[2] != `{"events":[{"type":"user.tool_confirmation","tool_use_id":"sevt_2","result":"allow"}]}` {
		t.Errorf("an allow must carry no deny_message and no session_thread_id: %s", rec.bodies[2])
	}

	if _, err := c.ListSessions(context.Background(), ListSessionsParams{AgentID: "agent_1", Statuses: []string{"running", "idle"}}); err != nil {
		t.Fatal(err)
	}
	if q := rec.requests[3].URL.RawQuery; q != "agent_id=agent_1&statuses%5B%5D=running&statuses%5B%5D=idle" {
		t.Errorf("sessions query %s", q)
	}
	if _, err := c.ListEvents(context.Background(), "..", ListEventsParams{}); err == nil {
		t.Error("a '..' session id was sent")
	}
}

func TestRFC3986(t *testing.T) {
	cases := map[string]string{
		"created_at[gt]":       "created_at%5Bgt%5D",
		"2026-01-01T00:00:00Z": "2026-01-01T00%3A00%3A00Z",
		"a b+c/~._-":           "a%20b%2Bc%2F~._-",
		"é":                    "%C3%A9",
	}
	for in, want := range cases {
		if got := rfc3986(in); got != want {
			t.Errorf("rfc3986(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPaginationReusesParams(t *testing.T) {
	rec := &recorder{respond: func(n int, r *http.Request) (int, http.Header, string) {
		switch n {
		case 0:
			return 200, nil, `{"data":[{"id":"e1","type":"agent.tool_use"}],"next_page":"p2"}`
		case 1:
			return 200, nil, `{"data":[],"next_page":"p3"}` // an empty page does not end the list
		default:
			return 200, nil, `{"data":[{"id":"e2","type":"user.tool_confirmation"}]}`
		}
	}}
	c, _ := newTestClient(t, rec, ClientOptions{})
	evs, err := c.ListEvents(context.Background(), "sesn_1", ListEventsParams{Types: []string{"agent.tool_use"}, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].ID != "e1" || evs[1].ID != "e2" || len(evs[0].Raw) == 0 {
		t.Fatalf("events %+v", evs)
	}
	want := []string{"limit=2&types%5B%5D=agent.tool_use", "limit=2&types%5B%5D=agent.tool_use&page=p2", "limit=2&types%5B%5D=agent.tool_use&page=p3"}
	for i, w := range want {
		if got := rec.requests[i].URL.RawQuery; got != w {
			t.Errorf("page %d query %q, want %q", i, got, w)
		}
		if rec.requests[i].Header.Get("Anthropic-Beta") != BetaManaged {
			t.Errorf("page %d lacks the beta header", i)
		}
	}
}

func TestRetryPolicy(t *testing.T) {
	errBody := `{"type":"error","error":{"type":"%s","message":"m"},"request_id":"req_1"}`
	cases := []struct {
		name     string
		statuses []int
		headers  []http.Header
		wantN    int
		wantErr  string
		wantWait []time.Duration
	}{
		{"5xx then success", []int{500, 503, 200}, nil, 3, "", []time.Duration{500 * time.Millisecond, time.Second}},
		{"429 honours retry-after-ms", []int{429, 200}, []http.Header{{"Retry-After-Ms": {"1500.5"}}}, 2, "", []time.Duration{1500500 * time.Microsecond}},
		{"408 honours retry-after seconds", []int{408, 200}, []http.Header{{"Retry-After": {"2"}}}, 2, "", []time.Duration{2 * time.Second}},
		{"409 retried", []int{409, 200}, nil, 2, "", []time.Duration{500 * time.Millisecond}},
		{"retries bounded by count", []int{529, 529, 529, 529}, nil, 3, "529 overloaded_error", []time.Duration{500 * time.Millisecond, time.Second}},
		{"404 is fatal", []int{404, 200}, nil, 1, "404 not_found_error", nil},
		{"400 is fatal", []int{400, 200}, nil, 1, "400 invalid_request_error", nil},
		{"x-should-retry false wins", []int{503, 200}, []http.Header{{"X-Should-Retry": {"false"}}}, 1, "503", nil},
		{"x-should-retry true wins", []int{400, 200}, []http.Header{{"X-Should-Retry": {"true"}}}, 2, "", []time.Duration{500 * time.Millisecond}},
		{"an absurd retry-after falls back to backoff", []int{429, 200}, []http.Header{{"Retry-After-Ms": {"-5"}}}, 2, "", []time.Duration{500 * time.Millisecond}},
	}
	types := map[int]string{400: "invalid_request_error", 404: "not_found_error", 408: "timeout_error", 409: "conflict_error", 429: "rate_limit_error", 500: "api_error", 503: "overloaded_error", 529: "overloaded_error"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{respond: func(n int, r *http.Request) (int, http.Header, string) {
				st := tc.statuses[min(n, len(tc.statuses)-1)]
				var h http.Header
				if n < len(tc.headers) {
					h = tc.headers[n]
				}
				if st == 200 {
					return 200, h, `{"id":"sesn_1","type":"session","status":"idle"}`
				}
				return st, h, fmt.Sprintf(errBody, types[st])
			}}
			c, slept := newTestClient(t, rec, ClientOptions{})
			_, err := c.GetSession(context.Background(), "sesn_1")
			if len(rec.requests) != tc.wantN {
				t.Errorf("%d requests, want %d", len(rec.requests), tc.wantN)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			if fmt.Sprint(*slept) != fmt.Sprint(tc.wantWait) {
				t.Errorf("waited %v, want %v", *slept, tc.wantWait)
			}
			if err != nil && strings.Contains(err.Error(), testKey) {
				t.Fatal("the error carries the API key")
			}
		})
	}
}

func TestRetriesBoundedByTime(t *testing.T) {
	rec := &recorder{respond: func(int, *http.Request) (int, http.Header, string) {
		return 429, http.Header{"Retry-After": {"20"}}, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`
	}}
	c, slept := newTestClient(t, rec, ClientOptions{MaxRetries: 5, MaxRetryElapsed: 30 * time.Second})
	_, err := c.GetSession(context.Background(), "sesn_1")
	if err == nil || len(rec.requests) != 2 || len(*slept) != 1 {
		t.Fatalf("want 2 attempts within 30 s, got %d (slept %v): %v", len(rec.requests), *slept, err)
	}
	if IsFatal4xx(err) {
		t.Error("a 429 is not fatal")
	}
}

func TestConnectionErrorsRetried(t *testing.T) {
	rec := &recorder{respond: func(int, *http.Request) (int, http.Header, string) { return 200, nil, `{"id":"s"}` }}
	c, slept := newTestClient(t, rec, ClientOptions{})
	c.base.Host = "127.0.0.1:1" // nothing listens there
	_, err := c.GetSession(context.Background(), "sesn_1")
	var ce *ConnectionError
	if !errors.As(err, &ce) || len(*slept) != 2 {
		t.Fatalf("want a ConnectionError after 2 retries, got %v (slept %v)", err, *slept)
	}
}

func TestIsFatal4xx(t *testing.T) {
	for status, fatal := range map[int]bool{400: true, 401: true, 403: true, 404: true, 422: true, 408: false, 409: false, 429: false, 500: false, 529: false} {
		if got := IsFatal4xx(&APIError{Status: status}); got != fatal {
			t.Errorf("IsFatal4xx(%d) = %v", status, got)
		}
	}
	if IsFatal4xx(errors.New("x")) {
		t.Error("a non-API error is not a fatal 4xx")
	}
}

func TestAPIKeyReread(t *testing.T) {
	rec := &recorder{respond: func(int, *http.Request) (int, http.Header, string) { return 200, nil, `{"id":"s"}` }}
	c, _ := newTestClient(t, rec, ClientOptions{})
	ctx := context.Background()
	if _, err := c.GetSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	// A Secret volume update: the file is replaced with a new key.
	next := filepath.Join(filepath.Dir(c.key.path), "api-key.new")
	if err := os.WriteFile(next, []byte("sk-ant-rotated-key-42"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, c.key.path); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if got := rec.requests[1].Header.Get("Authorization"); got != "Bearer sk-ant-rotated-key-42" {
		t.Fatalf("after rotation: %q", got)
	}
	if err := os.WriteFile(c.key.path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSession(ctx, "s"); err == nil || strings.Contains(err.Error(), "rotated") {
		t.Fatalf("an empty key file must fail without echoing the old key: %v", err)
	}
}

func TestErrorEnvelope(t *testing.T) {
	e := parseAPIError(404, http.Header{"Request-Id": {"req_9"}}, []byte(`{"type":"error","error":{"type":"not_found_error","message":"no such session","details":{"error_code":"session_not_found"}},"request_id":"req_9"}`))
	if e.Type != "not_found_error" || e.Message != "no such session" || e.ErrorCode != "session_not_found" || e.RequestID != "req_9" {
		t.Fatalf("%+v", e)
	}
	e = parseAPIError(502, nil, []byte("<html>bad gateway</html>"))
	if e.Message != "<html>bad gateway</html>" || e.Type != "" {
		t.Fatalf("%+v", e)
	}
}
