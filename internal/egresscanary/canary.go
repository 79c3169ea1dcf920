// Package egresscanary is the positive control behind egress-wait (cmd/egress-wait): a server
// the manager runs on every replica with two listeners, and the client side of its protocol.
//
// A failed connection proves nothing by itself: kube-router rejects a connection a
// NetworkPolicy blocks with the same "connection refused" a closed port or a Service without
// endpoints gives, and a DNS error or an unreachable API server fails just as fast. So a
// sandbox pod's egress policy always allows the CONTROL port and never the DENIED port, and on
// each control connection the server dials its own denied listener and says whether it is
// listening. A failed dial of the denied port counts as the policy's block only when the
// control, reached through the same policy in the same round, said the denied listener was up.
//
// The protocol is one line each way, over TCP:
//
//	client: gate-egress-canary/v1 <nonce>
//	server: gate-egress-canary/v1 denied-listening <nonce>   (or denied-down <nonce>)
//
// The nonce (1 to 64 of [A-Za-z0-9_-]) ties an answer to its question, so nothing replayed or
// cached can stand in for a live answer.
package egresscanary

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// Protocol names the protocol and its version; every line starts with it.
const Protocol = "gate-egress-canary/v1"

// The answers of the control port.
const (
	DeniedListening = "denied-listening"
	DeniedDown      = "denied-down"
)

// The manager's default ports (--egress-canary-port, --egress-canary-denied-port).
const (
	DefaultControlPort = 9444
	DefaultDeniedPort  = 9445
)

const (
	// ioTimeout bounds every read, write and self-check of one control connection.
	ioTimeout = 2 * time.Second
	// maxLine is the longest request line read; longer ones are dropped unanswered.
	maxLine = len(Protocol) + 1 + maxNonce + 2
	// maxNonce is the longest nonce.
	maxNonce = 64
	// maxConns is how many control connections are served at once; more are closed unanswered.
	maxConns = 64
)

// Server listens on Control and Denied (host:port, as net.Listen takes them). It runs on every
// replica, leader or not (controller-runtime's LeaderElectionRunnable).
type Server struct {
	Control, Denied string
}

// NeedLeaderElection is false: every replica behind the canary Service must answer.
func (Server) NeedLeaderElection() bool { return false }

// Start listens and serves until ctx is done.
func (s Server) Start(ctx context.Context) error {
	l, err := s.Listen()
	if err != nil {
		return err
	}
	return l.Serve(ctx)
}

// Listen opens both listeners.
func (s Server) Listen() (*Listeners, error) {
	denied, err := net.Listen("tcp", s.Denied)
	if err != nil {
		return nil, fmt.Errorf("egress canary: denied listener: %w", err)
	}
	control, err := net.Listen("tcp", s.Control)
	if err != nil {
		denied.Close()
		return nil, fmt.Errorf("egress canary: control listener: %w", err)
	}
	return &Listeners{control: control, denied: denied, deniedLocal: localAddr(denied.Addr())}, nil
}

// Listeners are a Server's open listeners.
type Listeners struct {
	control, denied net.Listener
	// deniedLocal is where the control dials the denied listener from inside the pod.
	deniedLocal string
}

// ControlAddr is the control listener's address.
func (l *Listeners) ControlAddr() string { return l.control.Addr().String() }

// DeniedAddr is the denied listener's address.
func (l *Listeners) DeniedAddr() string { return l.denied.Addr().String() }

// localAddr is a listener's address as the pod itself dials it: an unspecified host (":9445")
// is loopback.
func localAddr(a net.Addr) string {
	t, ok := a.(*net.TCPAddr)
	if !ok || t.IP == nil || t.IP.IsUnspecified() {
		port := 0
		if ok {
			port = t.Port
		}
		return net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	}
	return t.String()
}

// Serve serves both listeners until ctx is done, then closes them and waits for every
// connection it started.
func (l *Listeners) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errs <- acceptLoop(ctx, l.denied, &wg, func(c net.Conn) { c.Close() })
	}()
	sem := make(chan struct{}, maxConns)
	go func() {
		defer wg.Done()
		errs <- acceptLoop(ctx, l.control, &wg, func(c net.Conn) {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
				l.answer(c)
			default:
				c.Close()
			}
		})
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
		if err == nil {
			// One listener was closed under it (the denied one, say): the other keeps serving,
			// and the control then answers denied-down, until ctx is done.
			<-ctx.Done()
		}
	}
	l.control.Close()
	l.denied.Close()
	wg.Wait()
	return err
}

// acceptLoop hands every connection of ln to serve, in its own goroutine, until ln is closed.
// It returns nil when ctx is done, else the error that stopped it.
func acceptLoop(ctx context.Context, ln net.Listener, wg *sync.WaitGroup, serve func(net.Conn)) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("egress canary: accepting on %s: %w", ln.Addr(), err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve(c)
		}()
	}
}

// answer reads one request line from c and answers whether the denied listener accepts a
// connection now. A malformed request is closed unanswered.
func (l *Listeners) answer(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	nonce, ok := readRequest(c)
	if !ok {
		return
	}
	state := DeniedDown
	if d, err := net.DialTimeout("tcp", l.deniedLocal, ioTimeout); err == nil {
		d.Close()
		state = DeniedListening
	}
	_, _ = fmt.Fprintf(c, "%s %s %s\n", Protocol, state, nonce)
}

func readRequest(r io.Reader) (nonce string, ok bool) {
	line, err := bufio.NewReaderSize(io.LimitReader(r, int64(maxLine)), maxLine).ReadString('\n')
	if err != nil {
		return "", false
	}
	proto, nonce, found := strings.Cut(strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), " ")
	if !found || proto != Protocol || !ValidNonce(nonce) {
		return "", false
	}
	return nonce, true
}

// ValidNonce reports whether n is 1 to 64 of [A-Za-z0-9_-].
func ValidNonce(n string) bool {
	if n == "" || len(n) > maxNonce {
		return false
	}
	for _, r := range n {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}

// Ask sends the request with nonce over c (a connection to the control port) and reads the
// answer: true when the server's denied listener was listening. Any other answer, a wrong
// nonce, or an I/O fault is an error, never a "listening". It sets c's deadline.
func Ask(c net.Conn, nonce string, deadline time.Time) (bool, error) {
	if !ValidNonce(nonce) {
		return false, fmt.Errorf("invalid nonce %q", nonce)
	}
	if err := c.SetDeadline(deadline); err != nil {
		return false, err
	}
	if _, err := fmt.Fprintf(c, "%s %s\n", Protocol, nonce); err != nil {
		return false, fmt.Errorf("sending to the control port: %w", err)
	}
	const maxAnswer = 128
	line, err := bufio.NewReaderSize(io.LimitReader(c, maxAnswer), maxAnswer).ReadString('\n')
	if err != nil {
		return false, fmt.Errorf("reading the control port's answer: %w", err)
	}
	fields := strings.Fields(line)
	if len(fields) != 3 || fields[0] != Protocol {
		return false, fmt.Errorf("the control port did not answer %s: %q", Protocol, line)
	}
	if fields[2] != nonce {
		return false, errors.New("the control port answered another request's nonce")
	}
	switch fields[1] {
	case DeniedListening:
		return true, nil
	case DeniedDown:
		return false, nil
	default:
		return false, fmt.Errorf("the control port answered %q", fields[1])
	}
}
