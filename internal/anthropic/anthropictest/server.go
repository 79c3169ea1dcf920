// Package anthropictest is an in-process fake of the Managed Agents Sessions API for tests,
// the demo and benchmarks, faithful to specs/managed-agents-wire.md: the paths and headers it
// requires, PageCursor pagination with types[] filtering and order, the SSE stream (event name
// equal to the payload's type, ping frames), requires_action bookkeeping, and the error
// envelope. It injects faults on request and records every request.
package anthropictest

import (
	"net/http"
	"net/http/httptest"
	"slices"
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
