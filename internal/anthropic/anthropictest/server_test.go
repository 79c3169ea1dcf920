package anthropictest_test

import (
	"context"
	"testing"
	"time"

	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestTLSFakeSpeaksHTTP2: the client negotiates HTTP/2 with the fake, as with the real API,
// streams are counted while open, and a second confirmation is refused unless the test asks
// the fake to record it.
func TestTLSFakeSpeaksHTTP2(t *testing.T) {
	f := anthropictest.Start(t)
	ids := f.AddSession("sesn_h2", "agent_1", anthropictest.ToolUse{Name: "read", Permission: "ask"})
	c := f.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	stream, err := c.StreamEvents(ctx, "sesn_h2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, func() bool { return f.Streams("sesn_h2") == 1 && f.StreamingSessions() == 1 })
	if err := c.SendEvents(ctx, "sesn_h2", anthropic.Confirm(ids[0], true, "")); err != nil {
		t.Fatal(err)
	}
	if err := c.SendEvents(ctx, "sesn_h2", anthropic.Confirm(ids[0], true, "")); !anthropic.IsFatal4xx(err) {
		t.Fatalf("a second confirmation: want a 400, got %v", err)
	}
	f.AcceptDuplicateConfirmations(true)
	if err := c.SendEvents(ctx, "sesn_h2", anthropic.Confirm(ids[0], true, "")); err != nil {
		t.Fatalf("a second confirmation the fake records: %v", err)
	}
	if n := len(f.Confirmations("sesn_h2")); n != 2 {
		t.Fatalf("%d confirmations recorded, want both", n)
	}
	stream.Close()
	testutil.WaitFor(t, func() bool { return f.Streams("sesn_h2") == 0 })
	for _, r := range f.Requests() {
		if r.Proto != "HTTP/2.0" {
			t.Fatalf("%s %s came over %s", r.Method, r.Path, r.Proto)
		}
	}
}
