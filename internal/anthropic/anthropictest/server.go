// Package anthropictest is an in-process fake of the Managed Agents Sessions API for tests,
// the demo and benchmarks, faithful to specs/managed-agents-wire.md: the paths and headers it
// requires, PageCursor pagination with types[] filtering and order, the SSE stream (event name
// equal to the payload's type, ping frames), requires_action bookkeeping, the agents AddAgent
// scripts (GET /v1/agents/{id}), and the error envelope. It injects faults on request and
// records every request.
package anthropictest

import (
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
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
	// Proto is the protocol the request came over: HTTP/2.0 from a NewTLS fake.
	Proto  string
	Header http.Header
	Body   string
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
	agents    map[string]map[string]any // AddAgent's, as GET /v1/agents/{id} answers them
	order     []string
	requests  []Request
	faults    []*Fault
	cutStream int  // cut the next stream after this many bytes of events (0: no cut)
	duplicate bool // send every streamed event twice
	noLog     bool // RecordRequests(false)
	// acceptTwice records a confirmation of a call already answered instead of refusing it.
	acceptTwice bool
	seq         int
	clock       func() time.Time
}

type session struct {
	id, agentID, status string
	events              []map[string]any
	pending             []string // tool-use ids awaiting an answer, in order
	threadOf            map[string]string
	subs                map[chan map[string]any]struct{}
}

// New starts a fake on loopback that accepts the given API key, over plain HTTP/1.1: for
// peers that cannot be handed a CA (a confirmer pod in the local cluster, the Node SDK).
func New(apiKey string) *Server {
	s := newServer(apiKey)
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// NewTLS starts a fake that, like the real API, speaks HTTP/2 over TLS (ALPN h2), so session
// streams are multiplexed on a few connections as they are in production. Its certificate is
// its own: CertPool gives it to an in-process client, WriteCA to another process.
func NewTLS(apiKey string) *Server {
	s := newServer(apiKey)
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.EnableHTTP2 = true
	s.StartTLS()
	return s
}

func newServer(apiKey string) *Server {
	return &Server{APIKey: apiKey, PingInterval: 15 * time.Second, sessions: map[string]*session{}, clock: time.Now}
}

// CertPool holds the certificate of a NewTLS fake; nil for a plain one.
func (s *Server) CertPool() *x509.CertPool {
	if s.TLS == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	return pool
}

// WriteCA writes the certificate of a NewTLS fake to path as PEM (the confirmer's
// --anthropic-ca-file).
func (s *Server) WriteCA(path string) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o644)
}

// Requests returns a copy of the recorded requests.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// RecordRequests turns the request log on (the default) or off; a benchmark that sends
// hundreds of thousands of requests keeps no log.
func (s *Server) RecordRequests(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noLog = !on
}

// StreamingSessions is the number of sessions with at least one event stream open now.
func (s *Server) StreamingSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ss := range s.sessions {
		if len(ss.subs) > 0 {
			n++
		}
	}
	return n
}

// Streams is the number of event streams of a session open now.
func (s *Server) Streams(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions[id].subs)
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

// AcceptDuplicateConfirmations makes the fake record a confirmation of a call that is already
// answered, as a server that does not deduplicate might (the specs leave it open), instead of
// refusing it with 400: a test then sees every confirmation the confirmer sent, not only the
// first.
func (s *Server) AcceptDuplicateConfirmations(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acceptTwice = on
}

// DuplicateStreamEvents makes the stream send every event twice.
func (s *Server) DuplicateStreamEvents(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.duplicate = on
}
