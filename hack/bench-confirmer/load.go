package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
)

// call is one paused tool call of the benchmark.
type call struct{ session, id string }

// pausedAt is the call's processed_at, as the fake stamped it.
func (c call) pausedAt(fake *anthropictest.Server) time.Time {
	for _, e := range fake.Events(c.session) {
		if e["id"] == c.id {
			at, _ := time.Parse(time.RFC3339Nano, e["processed_at"].(string))
			return at
		}
	}
	return time.Time{}
}

func pauseOn(n int) []anthropictest.ToolUse {
	out := make([]anthropictest.ToolUse, n)
	for i := range out {
		out[i] = anthropictest.ToolUse{Name: "Bash", Input: map[string]any{"command": fmt.Sprintf("go test ./pkg%d/...", rand.IntN(1000))}, Permission: "ask"}
	}
	return out
}

// steady pauses sessions chosen at random on one call each, rate pauses a second in all with
// exponential gaps between them (a Poisson process), for d. A pause that falls behind its
// schedule is made at once, so the rate holds on a busy machine.
func steady(fake *anthropictest.Server, ids []string, rate float64, d time.Duration) []call {
	var out []call
	start := time.Now()
	next := start
	for {
		next = next.Add(time.Duration(rand.ExpFloat64() / rate * float64(time.Second)))
		if next.Sub(start) >= d {
			return out
		}
		time.Sleep(time.Until(next))
		id := ids[rand.IntN(len(ids))]
		for _, c := range fake.AddCalls(id, pauseOn(1)...) {
			out = append(out, call{id, c})
		}
	}
}

// burst makes every session pause on n calls at once.
func burst(fake *anthropictest.Server, ids []string, n int) []call {
	var mu sync.Mutex
	var out []call
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			got := fake.AddCalls(id, pauseOn(n)...)
			mu.Lock()
			defer mu.Unlock()
			for _, c := range got {
				out = append(out, call{id, c})
			}
		})
	}
	wg.Wait()
	return out
}

// report waits until every call is confirmed and prints the latencies, and any call
// confirmed more than once.
func report(fake *anthropictest.Server, phase, what string, calls []call) error {
	if len(calls) == 0 {
		fmt.Printf("pause-to-confirmation, %s: no calls\n", what)
		return nil
	}
	if err := waitFor(120*time.Second, func() bool { return len(unconfirmed(fake, calls)) == 0 }); err != nil {
		return fmt.Errorf("%s: %d of %d calls not confirmed: %w", phase, len(unconfirmed(fake, calls)), len(calls), err)
	}
	lat, twice := latencies(fake, calls)
	fmt.Printf("pause-to-confirmation, %s (%d calls in %d sessions): p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		what, len(lat), *sessions, ms(pct(lat, 50)), ms(pct(lat, 99)), ms(lat[len(lat)-1]))
	if twice > 0 {
		return fmt.Errorf("%s: %d calls confirmed more than once", phase, twice)
	}
	return nil
}

// bySession groups calls by session.
func bySession(calls []call) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, c := range calls {
		if out[c.session] == nil {
			out[c.session] = map[string]bool{}
		}
		out[c.session][c.id] = true
	}
	return out
}

func unconfirmed(fake *anthropictest.Server, calls []call) []call {
	var out []call
	for session, ids := range bySession(calls) {
		done := map[string]bool{}
		for _, e := range fake.Confirmations(session) {
			done[e["tool_use_id"].(string)] = true
		}
		for id := range ids {
			if !done[id] {
				out = append(out, call{session, id})
			}
		}
	}
	return out
}

// latencies pairs each call with its first confirmation by the fake's processed_at stamps, and
// counts the calls confirmed more than once (the fake records them when it accepts duplicates).
func latencies(fake *anthropictest.Server, calls []call) (out []time.Duration, twice int) {
	for session, ids := range bySession(calls) {
		paused := map[string]time.Time{}
		seen := map[string]int{}
		for _, e := range fake.Events(session) {
			at, _ := time.Parse(time.RFC3339Nano, e["processed_at"].(string))
			switch e["type"] {
			case "agent.tool_use":
				paused[e["id"].(string)] = at
			case "user.tool_confirmation":
				id := e["tool_use_id"].(string)
				if !ids[id] {
					continue
				}
				if seen[id]++; seen[id] == 1 {
					out = append(out, at.Sub(paused[id]))
				} else if seen[id] == 2 {
					twice++
				}
			}
		}
	}
	slices.Sort(out)
	return out, twice
}

func loadGuard(url string) (float64, time.Duration) {
	body := []byte(`{"tool":"Bash","input":{"command":"go test ./... -count=1"},"surface":"harness"}`)
	var mu sync.Mutex
	var all []time.Duration
	deadline := time.Now().Add(*guardFor)
	var wg sync.WaitGroup
	for range *guardConns {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			var mine []time.Duration
			for time.Now().Before(deadline) {
				start := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					continue
				}
				// Drained so the connection is reused; a failed read only costs a new connection.
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(all)
	return float64(len(all)) / guardFor.Seconds(), pct(all, 99)
}

func pct(s []time.Duration, p int) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

func waitFor(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mib(b int64) float64        { return float64(b) / (1 << 20) }
