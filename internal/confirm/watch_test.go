package confirm

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/testutil"
)

func TestWatcherStreamsAndReconnects(t *testing.T) {
	f := newFake(t)
	f.PingInterval = 50 * time.Millisecond
	f.DuplicateStreamEvents(true)
	f.AddSession("sesn_w", "agent_1")
	c := newConfirmer(t, f)
	w := &Watcher{Confirmer: c, AgentIDs: []string{"agent_1"}, PollInterval: time.Hour, IdleTimeout: time.Second}
	reconnects := make(chan struct{}, 10)
	w.OnReconnect = func() { reconnects <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher: %v", err)
		}
	}()

	testutil.WaitFor(t, func() bool { return streamsOpen(f, "sesn_w") >= 1 })
	ids := f.AddCalls("sesn_w", anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "rm -rf /"}, Permission: "ask"})
	testutil.WaitFor(t, func() bool { return len(f.Confirmations("sesn_w")) == 1 })

	// The next stream is cut mid-frame: the watcher reconnects, re-lists and answers.
	f.CutNextStream(40)
	f.Inject(anthropictest.Fault{PathSuffix: "/stream", Status: 500}) // and the first reconnect fails
	opened := streamsOpen(f, "sesn_w")
	more := f.AddCalls("sesn_w", anthropictest.ToolUse{Name: "read", Permission: "ask"})
	_ = more
	testutil.WaitFor(t, func() bool { return len(f.Confirmations("sesn_w")) >= 2 || streamsOpen(f, "sesn_w") > opened })
	testutil.WaitFor(t, func() bool { return len(f.Confirmations("sesn_w")) == 2 })
	got := confirmations(t, f, "sesn_w")
	if !strings.HasPrefix(got[ids[0]], "deny:") || got[more[0]] != "allow" {
		t.Fatalf("confirmations %v", got)
	}
	f.Terminate("sesn_w")
	testutil.WaitFor(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.watching["sesn_w"] == nil
	})
}

func streamsOpen(f *anthropictest.Server, id string) int {
	n := 0
	for _, r := range f.Requests() {
		if r.Path == "/v1/sessions/"+id+"/events/stream" {
			n++
		}
	}
	return n
}

func TestQueueDedupes(t *testing.T) {
	f := newFake(t)
	f.AddSession("sesn_q", "agent_1", anthropictest.ToolUse{Name: "read", Permission: "ask"})
	q := NewQueue(newConfirmer(t, f), 2)
	if err := q.Add("sesn_q"); err != nil {
		t.Fatal(err)
	}
	if err := q.Add("sesn_q"); err != nil { // already queued: no second entry, and no error
		t.Fatal(err)
	}
	if err := q.Add("sesn_other"); err != nil {
		t.Fatal(err)
	}
	if err := q.Add("sesn_third"); err != ErrQueueFull {
		t.Fatalf("want ErrQueueFull, got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Run(ctx, 2); close(done) }()
	testutil.WaitFor(t, func() bool { return len(f.Confirmations("sesn_q")) == 1 })
	cancel()
	<-done
}

// TestListStreamAndWebhookTogether answers one session from the stream (with every event
// duplicated), from webhook-queued passes on a second replica, and from polls, all at once:
// each call is confirmed exactly once.
func TestListStreamAndWebhookTogether(t *testing.T) {
	f := newFake(t)
	f.DuplicateStreamEvents(true)
	f.AddSession("sesn_all", "agent_1")
	streaming := newConfirmer(t, f)
	w := &Watcher{Confirmer: streaming, AgentIDs: []string{"agent_1"}, PollInterval: 50 * time.Millisecond, IdleTimeout: 5 * time.Second}
	replica := newConfirmer(t, f)
	q := NewQueue(replica, 16)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := w.Run(ctx); err != nil {
			t.Errorf("watcher: %v", err)
		}
	}()
	go func() { defer wg.Done(); q.Run(ctx, 4) }()
	defer func() { cancel(); wg.Wait() }()

	testutil.WaitFor(t, func() bool { return streamsOpen(f, "sesn_all") >= 1 })
	var calls []anthropictest.ToolUse
	for i := range 10 {
		calls = append(calls, anthropictest.ToolUse{Name: "read", Input: map[string]any{"file_path": fmt.Sprint(i)}, Permission: "ask"})
	}
	f.AddCalls("sesn_all", calls...)
	for range 5 {
		if err := q.Add("sesn_all"); err != nil { // webhooks for the same session, as the sender retries
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, func() bool { return len(f.Pending("sesn_all")) == 0 })
	if got := confirmations(t, f, "sesn_all"); len(got) != 10 {
		t.Fatalf("confirmations %v", got)
	}
}
