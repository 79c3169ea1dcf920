package gateapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
	"github.com/intutic/gate-operator/internal/testutil"
)

// serve runs the API's own server (as cmd/confirmer does) on a loopback port.
func serve(t *testing.T, a *API, o ServerOptions) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := a.NewServer(l.Addr().String(), o)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		// Shutdown, not Close: it waits for the connections' goroutines (net/http lingers up
		// to 500 ms on one whose body it did not read), which goleak would report otherwise.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return l.Addr().String()
}

// stall sends a request's headers and the start of a 1 MiB body, then nothing more.
func stall(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: gate\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"+
		"Webhook-Id: msg_1\r\nWebhook-Timestamp: %d\r\nWebhook-Signature: v1,Zm9yZ2Vk\r\n\r\n{\"tool\":\"", path, 1<<20, time.Now().Unix())
	return conn
}

// answered reports whether the server has answered (or closed) a stalled connection: a
// connection still holding its slot has nothing to read.
func answered(t *testing.T, c net.Conn) bool {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout()
}

func limitsAPI(t *testing.T) *API {
	wh, err := anthropic.NewWebhookVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	return &API{Gate: gatetest.CodingAgents(t), Webhook: wh, Log: logr.Discard()} // Auth nil: the body is read at once
}

// TestStalledBodyIsCut: a client that sends headers and then stalls its body loses the
// connection once the read timeout passes, on the unauthenticated webhook route and on the
// gate routes, and what it is told does not carry the server's addresses.
func TestStalledBodyIsCut(t *testing.T) {
	addr := serve(t, limitsAPI(t), ServerOptions{ReadTimeout: 300 * time.Millisecond})
	for _, path := range []string{"/v1/webhooks/anthropic", "/v1/guard"} {
		t.Run(path, func(t *testing.T) {
			conn := stall(t, addr, path)
			if err := conn.SetReadDeadline(time.Now().Add(15 * time.Second)); err != nil { // generous: the timeout is 300 ms
				t.Fatal(err)
			}
			got, err := io.ReadAll(conn)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the server kept a stalled body open; it answered %q", got)
			}
			if strings.Contains(string(got), "127.0.0.1") || strings.Contains(string(got), "i/o timeout") {
				t.Fatalf("the answer carries internal detail: %q", got)
			}
		})
	}
}

// TestWebhookBodiesInFlightAreCapped: beyond MaxWebhookBodies stalled webhook bodies, the
// unauthenticated route answers 503 at once instead of reading another body; room comes back
// when they go.
func TestWebhookBodiesInFlightAreCapped(t *testing.T) {
	a := limitsAPI(t)
	a.MaxWebhookBodies = 2
	addr := serve(t, a, ServerOptions{})
	post := func() int {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/webhooks/anthropic", strings.NewReader(`{}`))
		req.Header = headers("msg_x", time.Now().Unix(), "v1,Zm9yZ2Vk")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
		return resp.StatusCode
	}
	if got := post(); got != http.StatusUnauthorized {
		t.Fatalf("a bad signature with room to spare: %d", got)
	}
	// A stalled delivery that reached the handler while a probe held a slot was itself answered
	// 503 and holds nothing; it is replaced until both hold a slot and the probe is refused.
	stalled := []net.Conn{stall(t, addr, "/v1/webhooks/anthropic"), stall(t, addr, "/v1/webhooks/anthropic")}
	testutil.WaitFor(t, func() bool {
		for i, c := range stalled {
			if answered(t, c) {
				c.Close()
				stalled[i] = stall(t, addr, "/v1/webhooks/anthropic")
			}
		}
		return post() == http.StatusServiceUnavailable
	})
	for _, c := range stalled {
		c.Close()
	}
	testutil.WaitFor(t, func() bool { return post() == http.StatusUnauthorized })
}

// TestWebhookBodyIsBounded: a webhook body past the limit is refused without being kept.
func TestWebhookBodyIsBounded(t *testing.T) {
	addr := serve(t, limitsAPI(t), ServerOptions{})
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/webhooks/anthropic", strings.NewReader(strings.Repeat("a", maxWebhookBody+1)))
	req.Header = headers("msg_big", time.Now().Unix(), "v1,Zm9yZ2Vk")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d, want 413", resp.StatusCode)
	}
}
