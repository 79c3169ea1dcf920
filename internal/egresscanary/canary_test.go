package egresscanary

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// serve starts a Server on loopback ports and stops it when the test ends.
func serve(t *testing.T) *Listeners {
	t.Helper()
	l, err := Server{Control: "127.0.0.1:0", Denied: "127.0.0.1:0"}.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l
}

func ask(t *testing.T, addr, nonce string) (bool, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return Ask(c, nonce, time.Now().Add(5*time.Second))
}

func TestControlSaysDeniedListening(t *testing.T) {
	l := serve(t)
	listening, err := ask(t, l.ControlAddr(), "n0nce_1")
	if err != nil || !listening {
		t.Fatalf("Ask = %v, %v; want listening", listening, err)
	}
	// The denied port accepts (and closes) connections: only a policy can make a dial fail.
	c, err := net.Dial("tcp", l.DeniedAddr())
	if err != nil {
		t.Fatalf("dialling the denied listener: %v", err)
	}
	c.Close()
}

func TestControlSaysDeniedDown(t *testing.T) {
	l := serve(t)
	l.denied.Close()
	listening, err := ask(t, l.ControlAddr(), "abc")
	if err != nil || listening {
		t.Fatalf("Ask with the denied listener closed = %v, %v; want denied-down", listening, err)
	}
}

func TestControlEchoesTheNonce(t *testing.T) {
	l := serve(t)
	c, err := net.Dial("tcp", l.ControlAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "%s %s\n", Protocol, "xyz-9")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if want := "gate-egress-canary/v1 denied-listening xyz-9\n"; line != want {
		t.Fatalf("answer %q, want %q", line, want)
	}
}

func TestControlDropsMalformedRequests(t *testing.T) {
	l := serve(t)
	for _, req := range []string{
		"hello\n",
		"gate-egress-canary/v2 abc\n",
		Protocol + " \n",
		Protocol + " a b\n",
		Protocol + " " + strings.Repeat("a", 65) + "\n",
		Protocol + " abc", // no newline: the connection is closed at EOF
	} {
		c, err := net.Dial("tcp", l.ControlAddr())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(c, req)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		if line, err := bufio.NewReader(c).ReadString('\n'); err == nil || line != "" {
			t.Errorf("request %q answered %q, want the connection closed unanswered", req, line)
		}
		c.Close()
	}
}

// fakeControl answers every connection with the line answer(nonce).
func fakeControl(t *testing.T, answer func(nonce string) string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			nonce, _ := readRequest(c)
			fmt.Fprint(c, answer(nonce))
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

func TestAskRefusesWhatIsNotALiveAnswer(t *testing.T) {
	for name, answer := range map[string]func(string) string{
		"another nonce":  func(string) string { return Protocol + " denied-listening other\n" },
		"another proto":  func(n string) string { return "gate-egress-canary/v0 denied-listening " + n + "\n" },
		"unknown state":  func(n string) string { return Protocol + " listening " + n + "\n" },
		"no answer":      func(string) string { return "" },
		"no newline":     func(n string) string { return Protocol + " denied-listening " + n },
		"extra fields":   func(n string) string { return Protocol + " denied-listening " + n + " x\n" },
		"denied is down": func(n string) string { return Protocol + " denied-down " + n + "\n" },
	} {
		t.Run(name, func(t *testing.T) {
			addr := fakeControl(t, answer)
			listening, err := ask(t, addr, "mine")
			if listening {
				t.Fatalf("Ask = listening (err %v), want not listening", err)
			}
			if name != "denied is down" && err == nil {
				t.Fatal("Ask returned no error")
			}
		})
	}
}

// TestControlIsBounded: idle connections hold at most maxConns slots; one more is closed
// unanswered, and a slot is free again once an idle one times out or closes.
func TestControlIsBounded(t *testing.T) {
	l := serve(t)
	var idle []net.Conn
	for range maxConns {
		c, err := net.Dial("tcp", l.ControlAddr())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	// The server takes the slots as it accepts; wait until a probe is refused.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", l.ControlAddr())
		if err != nil {
			t.Fatal(err)
		}
		listening, err := Ask(c, "over", time.Now().Add(time.Second))
		c.Close()
		if err != nil && !listening {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("with every slot held, the control port still answered")
		}
	}
	for _, c := range idle {
		c.Close()
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		if listening, err := ask(t, l.ControlAddr(), "again"); err == nil && listening {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the control port did not answer once the idle connections closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
