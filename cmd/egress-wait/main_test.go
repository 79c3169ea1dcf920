package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intutic/gate-operator/internal/egresscanary"
)

const (
	control = "198.18.16.1:9444"
	denied  = "198.18.16.1:9445"
)

// controlAnswer is what the fake control port does with a request: the line it answers.
type controlAnswer func(nonce string) string

func listening(n string) string { return egresscanary.Protocol + " denied-listening " + n + "\n" }
func down(n string) string      { return egresscanary.Protocol + " denied-down " + n + "\n" }

// deniedResult is one dial of the denied port: nil connects, an error fails.
type deniedResult error

var (
	connects deniedResult
	refused  deniedResult = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	dropped  deniedResult = &net.OpError{Op: "dial", Net: "tcp", Err: errTimeout{}}
	noHost   deniedResult = &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "canary.invalid", IsNotFound: true}}
)

type errTimeout struct{}

func (errTimeout) Error() string { return "i/o timeout" }
func (errTimeout) Timeout() bool { return true }

// fakeNet serves the control address with answer (nil: the control dial fails) and answers
// the denied address from script (its last entry repeats). Every dial advances the clock.
func fakeNet(t *testing.T, answer controlAnswer, script []deniedResult, clock *time.Time) dialFunc {
	i := 0
	return func(_, address string, _ time.Duration) (net.Conn, error) {
		*clock = clock.Add(100 * time.Millisecond)
		switch address {
		case control:
			if answer == nil {
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
			}
			client, server := net.Pipe()
			go func() {
				defer server.Close()
				buf := make([]byte, 256)
				n, _ := server.Read(buf)
				req := strings.TrimSpace(string(buf[:n]))
				_, nonce, _ := strings.Cut(req, " ")
				fmt.Fprint(server, answer(nonce))
			}()
			return client, nil
		case denied:
			r := script[min(i, len(script)-1)]
			i++
			if r != nil {
				return nil, r
			}
			client, server := net.Pipe()
			server.Close()
			return client, nil
		}
		t.Errorf("dialled %s, which is neither the control nor the denied canary", address)
		return nil, errors.New("unexpected address")
	}
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer controlAnswer
		script []deniedResult
		want   int
	}{
		{"control listening, denied refused twice: enforced", listening, []deniedResult{refused, refused}, 0},
		{"control listening, denied dropped twice: enforced", listening, []deniedResult{dropped}, 0},
		{"open, then blocked", listening, []deniedResult{connects, connects, refused, refused}, 0},
		{"one block between opens is not enforcement", listening, []deniedResult{connects, refused, connects, refused, refused}, 0},
		{"denied dial connects: not enforced, the pod fails", listening, []deniedResult{connects}, 1},
		{"a single block then open forever: the pod fails", listening, []deniedResult{refused, connects}, 1},
		{"refused canary without a control: not enforced", nil, []deniedResult{refused}, 1},
		{"control says denied-down: not enforced", down, []deniedResult{refused}, 1},
		{"control answers another nonce: not enforced", func(string) string { return listening("replayed") }, []deniedResult{refused}, 1},
		{"control answers garbage: not enforced", func(string) string { return "HTTP/1.1 400 Bad Request\n" }, []deniedResult{refused}, 1},
		{"unknown denied host: not enforced", listening, []deniedResult{noHost}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := time.Unix(0, 0)
			now := func() time.Time { return clock }
			got := run([]string{"--control", control, "--denied", denied, "--timeout", "5s", "--interval", "0s"}, now, fakeNet(t, tc.answer, tc.script, &clock))
			if got != tc.want {
				t.Fatalf("run = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestRunRealFailuresAreNotEnforcement dials for real: a refused port and a name that does
// not resolve fail in milliseconds, as a NetworkPolicy block does under kube-router, and
// must not pass as one.
func TestRunRealFailuresAreNotEnforcement(t *testing.T) {
	for name, args := range map[string][]string{
		"refused canary and control":           {"--control", "127.0.0.1:1", "--denied", "127.0.0.1:1"},
		"unknown host":                         {"--control", "egress-canary.invalid:9444", "--denied", "egress-canary.invalid:9445"},
		"refused canary, control unknown":      {"--control", "egress-canary.invalid:9444", "--denied", "127.0.0.1:1"},
		"the API server refusing (no control)": {"--canary", "127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			args = append(args, "--timeout", "300ms", "--interval", "10ms", "--connect-timeout", "200ms")
			if got := run(args, time.Now, net.DialTimeout); got == 0 {
				t.Fatalf("run %q = 0 (enforced), want a failure", args)
			}
		})
	}
}

// TestRunAgainstTheCanaryServer runs against the manager's canary server on loopback: with
// nothing blocking the denied port it is never enforced; with the denied port "blocked" (a
// dialer standing in for the policy) it is.
func TestRunAgainstTheCanaryServer(t *testing.T) {
	l, err := egresscanary.Server{Control: "127.0.0.1:0", Denied: "127.0.0.1:0"}.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := contextWithCancel()
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	args := []string{"--control", l.ControlAddr(), "--denied", l.DeniedAddr(), "--timeout", "500ms", "--interval", "10ms"}
	if got := run(args, time.Now, net.DialTimeout); got != 1 {
		t.Fatalf("with the denied port open, run = %d, want 1", got)
	}
	policy := func(network, address string, timeout time.Duration) (net.Conn, error) {
		if address == l.DeniedAddr() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		return net.DialTimeout(network, address, timeout)
	}
	if got := run(args, time.Now, policy); got != 0 {
		t.Fatalf("with the denied port blocked and the control listening, run = %d, want 0", got)
	}
}

func TestRunNeedsBothCanaries(t *testing.T) {
	for _, args := range [][]string{nil, {"--denied", denied}, {"--control", control}, {"--control", "no-port", "--denied", denied}} {
		if got := run(args, time.Now, net.DialTimeout); got != 2 {
			t.Errorf("run %q = %d, want 2", args, got)
		}
	}
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
