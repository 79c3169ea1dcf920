// Package gateagent is the gate-agent sidecar of a sandbox pod: a long-lived decider that keeps
// the pod's policy bundle compiled and answers gate-client's requests (internal/agentproto) on a
// Unix socket with exactly the bytes and exit status gate-hook would have answered, for the
// version of the volume the client saw. It writes a record of every decision, reports the
// decisions gate-hook made while the sidecar could not answer (the fallback spool), and exports
// metrics.
//
// It fails closed: a bundle that does not load makes every call refused with the gate's code,
// a panic in a decision is a refusal, and anything it cannot answer properly (a request it
// cannot read in time, an answer it cannot encode) it does not answer at all, so the client
// hands the call to gate-hook, which decides it itself.
package gateagent

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/decisionlog"
)

// Defaults of Options.
const (
	// DefaultMaxConnections bounds the connections open at once, each a goroutine blocked in a
	// read until its request is whole; further connections wait in the socket's backlog. It is
	// far above what one agent's hooks need, so that a caller holding many idle connections
	// open (they cost a goroutine and a 1 KiB buffer each) does not keep honest ones waiting.
	DefaultMaxConnections = 1024
	// DefaultRequestTimeout bounds the time a connection has to deliver its whole request.
	DefaultRequestTimeout = 2 * time.Second
	// DefaultWriteTimeout bounds the time an answer has to be taken.
	DefaultWriteTimeout = 2 * time.Second
	// DefaultMaxInputBytes bounds the hook inputs held at once (each at most
	// agentproto.MaxInput): a request's body is read only once its size fits.
	DefaultMaxInputBytes = 64 << 20
	// DefaultReloadInterval is how often the bundle is checked besides the directory's events.
	DefaultReloadInterval = 10 * time.Second
	// DefaultSpoolInterval is how often the fallback spool is read.
	DefaultSpoolInterval = 5 * time.Second
)

// Options configure a Server; zero values take the defaults.
type Options struct {
	// BundleDir is the policy volume, mounted as the agent's containers mount it (the same
	// volume, so ..data names the same version for both).
	BundleDir string
	// FallbackSpool is the file gate-hook appends its fallback decisions to; "" for none.
	FallbackSpool string
	// SpoolState is where the offset read up to in FallbackSpool is kept across restarts of
	// the sidecar, in a directory only it can write; "" keeps it in memory only.
	SpoolState string
	// Records receives one JSON line per decision (decisionlog.Record), written by a
	// decisionlog.Writer the Server owns; RecordOptions bound it (its Registerer is the Server's).
	Records       io.Writer
	RecordOptions decisionlog.WriterOptions
	Log           logr.Logger
	// Registerer registers the metrics; nil registers them nowhere.
	Registerer prometheus.Registerer

	// HumanLane, when set, holds the Ask verdicts of Claude Code calls for a human through the
	// pod's SessionConfirmer (the policy's spec.gateAgent.humanApproval); nil leaves an Ask to
	// Claude Code's own prompt.
	HumanLane *HumanLane

	MaxConnections int
	RequestTimeout time.Duration
	WriteTimeout   time.Duration
	MaxInputBytes  int64
	ReloadInterval time.Duration
	SpoolInterval  time.Duration
}

// Server answers gate-client's requests with the pod's policy.
type Server struct {
	dir     string
	log     logr.Logger
	metrics *metrics
	records *decisionlog.Writer
	opts    Options

	// state is the bundle in force, replaced whole by load; requests read it without locking.
	state atomic.Pointer[bundle]
	// loadMu makes loads one at a time, and guards asked.
	loadMu sync.Mutex
	asked  map[policyKey]struct{}
	ready  atomic.Bool

	inputs *semaphore.Weighted
	spool  *spoolReader
}

// New returns a Server for the options. It loads nothing yet: Run does, first.
func New(o Options) (*Server, error) {
	if o.BundleDir == "" {
		return nil, errors.New("gate-agent needs the bundle directory")
	}
	if o.Records == nil {
		return nil, errors.New("gate-agent needs a writer for its records")
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.MaxInputBytes < agentproto.MaxInput {
		o.MaxInputBytes = DefaultMaxInputBytes
	}
	if o.ReloadInterval <= 0 {
		o.ReloadInterval = DefaultReloadInterval
	}
	if o.SpoolInterval <= 0 {
		o.SpoolInterval = DefaultSpoolInterval
	}
	reg := o.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	o.RecordOptions.Registerer = reg
	s := &Server{dir: o.BundleDir, log: o.Log, metrics: newMetrics(reg), records: decisionlog.NewWriter(o.Records, o.RecordOptions), opts: o,
		asked: map[policyKey]struct{}{}, inputs: semaphore.NewWeighted(o.MaxInputBytes)}
	if o.FallbackSpool != "" {
		s.spool = &spoolReader{path: o.FallbackSpool, statePath: o.SpoolState}
	}
	return s, nil
}

// Ready reports whether the bundle was loaded once, or failed to load for good: from then on
// every call is answered, refused with the bundle's error code if it failed. A sidecar that
// cannot load its bundle is ready on purpose: the pod starts and its calls are refused with the
// reason, rather than the pod hanging with no reason given; refusing everything is fail-closed.
func (s *Server) Ready() bool { return s.ready.Load() }

// Run loads the bundle, then answers the connections of ln until ctx ends, while it watches the
// bundle and reports the fallback spool. When ctx ends it stops accepting, finishes the
// connections it has (each bounded by the request and write timeouts), writes the records
// queued, and returns nil; it closes ln. A Server runs once.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	defer s.records.Close()
	s.refresh(false)
	var wg sync.WaitGroup
	wg.Go(func() { s.watch(ctx, s.opts.ReloadInterval) })
	if s.spool != nil {
		wg.Go(func() { s.reportFallbacks(ctx) })
	}
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	err := s.serve(ctx, ln)
	_ = ln.Close()
	wg.Wait()
	return err
}

// serve accepts connections, at most MaxConnections open at once, until ln is closed, and
// waits for those open to end.
func (s *Server) serve(ctx context.Context, ln net.Listener) error {
	var conns sync.WaitGroup
	defer conns.Wait()
	slots := make(chan struct{}, s.opts.MaxConnections)
	backoff := time.Duration(0)
	for {
		select {
		case slots <- struct{}{}:
		default:
			s.metrics.acceptWaits.Inc()
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
		}
		conn, err := ln.Accept()
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors, say: wait a little rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Error(err, "accepting a connection; retrying", "in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		conns.Go(func() {
			defer func() { <-slots }()
			s.serveConn(conn)
		})
	}
}

// errNoRoom is a request whose input could not be held within MaxInputBytes before its deadline.
var errNoRoom = errors.New("no room for the request's input before its deadline")

// serveConn answers one connection: one request, one answer, then its record. A request that is
// not whole within RequestTimeout, or is malformed, gets no answer: the connection is closed,
// and the client hands the call to gate-hook.
func (s *Server) serveConn(conn net.Conn) {
	s.metrics.open.Inc()
	defer s.metrics.open.Dec()
	defer conn.Close()
	deadline := time.Now().Add(s.opts.RequestTimeout)
	if err := conn.SetReadDeadline(deadline); err != nil {
		return
	}
	var held int64
	defer func() { s.inputs.Release(held) }()
	req, err := agentproto.ReadRequest(conn, func(n int) error {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if s.inputs.Acquire(ctx, int64(n)) != nil {
			return errNoRoom
		}
		held = int64(n)
		return nil
	})
	if err != nil {
		result := connInvalid
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, errNoRoom) {
			result = connTimedOut
		}
		s.metrics.connections.WithLabelValues(result).Inc()
		s.log.V(1).Info("request not answered", "result", result, "error", err.Error())
		return
	}
	start := time.Now()
	resp, rec := s.answer(&req)
	s.inputs.Release(held) // the input is decided and hashed: its memory is free for others
	held = 0
	msg, err := agentproto.EncodeResponse(&resp)
	if err != nil {
		s.metrics.connections.WithLabelValues(connUnanswerable).Inc()
		s.log.Error(err, "the answer cannot be encoded; the client hands the call to gate-hook", "digestBytes", len(resp.Digest))
		return
	}
	if err := conn.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout)); err != nil {
		return
	}
	if _, err := conn.Write(msg); err != nil {
		// The client did not take the answer; it hands the call to gate-hook, which records it.
		s.metrics.connections.WithLabelValues(connWriteFailed).Inc()
		return
	}
	_ = conn.Close()
	took := time.Since(start)
	s.metrics.connections.WithLabelValues(connAnswered).Inc()
	s.metrics.latency.Observe(took.Seconds())
	rec.LatencyUS = took.Microseconds()
	s.records.Write(rec)
}
