// Command bench-confirmer measures the confirmer binary against the in-process Sessions API
// fake (hack/bench-confirmer.sh builds and runs it):
//
//  1. memory per watched session: the confirmer's RSS with N streamed sessions versus none;
//  2. pause-to-confirmation latency when each of N sessions pauses on M calls at once (p50,
//     p99), from the pause's processed_at to the confirmation's, both stamped by the fake;
//  3. /v1/guard throughput on loopback, in requests per second, with p99 latency.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

var (
	confirmerBin = flag.String("confirmer", "bin/confirmer", "confirmer binary")
	sessions     = flag.Int("sessions", 200, "concurrent sessions")
	calls        = flag.Int("calls", 5, "calls each session pauses on")
	guardFor     = flag.Duration("guard-duration", 10*time.Second, "how long /v1/guard is loaded")
	guardConns   = flag.Int("guard-clients", 8, "concurrent /v1/guard clients")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-confirmer:", err)
		os.Exit(1)
	}
}

func run() error {
	const key = "sk-ant-bench"
	fake := anthropictest.New(key)
	defer fake.Close()
	dir, err := os.MkdirTemp("", "bench-confirmer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	snap, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "bench/p", Generation: 1}, gatetest.RealisticRules(100))
	if err != nil {
		return err
	}
	data, _ := snap.Encode()
	if err := os.WriteFile(filepath.Join(dir, gate.SnapshotFileName), data, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte(key), 0o600); err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	cmd := exec.Command(*confirmerBin, "--listen", addr, "--insecure-no-auth",
		"--snapshot", filepath.Join(dir, gate.SnapshotFileName),
		"--anthropic-base-url", fake.URL, "--anthropic-api-key-file", filepath.Join(dir, "key"),
		"--agent-ids", "agent_bench", "--poll-interval", "1s", "--max-streams", strconv.Itoa(*sessions+10))
	logf, _ := os.Create(filepath.Join(os.TempDir(), "bench-confirmer.log"))
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		// Stopping the confirmer at the end of the run: it is killed, so Wait's error says so.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if err := waitHTTP("http://" + addr + "/readyz"); err != nil {
		return err
	}

	time.Sleep(2 * time.Second)
	rss0, go0 := rss(cmd.Process.Pid), minGoMemory(addr)
	ids := make([]string, *sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("sesn_bench_%03d", i)
		fake.AddSession(ids[i], "agent_bench")
	}
	if err := waitFor(60*time.Second, func() bool { return streams(fake) >= *sessions }); err != nil {
		return fmt.Errorf("streams: %d of %d open: %w", streams(fake), *sessions, err)
	}
	time.Sleep(2 * time.Second)
	rss1, go1 := rss(cmd.Process.Pid), minGoMemory(addr)
	fmt.Printf("confirmer RSS: %.1f MiB idle, %.1f MiB streaming %d sessions: %.1f KiB per watched session\n",
		mib(rss0), mib(rss1), *sessions, float64(rss1-rss0)/1024/float64(*sessions))
	fmt.Printf("confirmer Go heap in use + stacks (lowest of 20 samples): %.1f MiB idle, %.1f MiB streaming: %.1f KiB per watched session\n",
		mib(go0), mib(go1), float64(go1-go0)/1024/float64(*sessions))

	// Every session pauses on its calls at once.
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch []anthropictest.ToolUse
			for c := range *calls {
				batch = append(batch, anthropictest.ToolUse{Name: "Bash", Input: map[string]any{"command": fmt.Sprintf("go test ./pkg%d/...", c)}, Permission: "ask"})
			}
			fake.AddCalls(id, batch...)
		}()
	}
	wg.Wait()
	total := *sessions * *calls
	if err := waitFor(60*time.Second, func() bool { return confirmed(fake, ids) >= total }); err != nil {
		return fmt.Errorf("%d of %d calls confirmed: %w", confirmed(fake, ids), total, err)
	}
	lat := latencies(fake, ids)
	fmt.Printf("pause-to-confirmation latency over %d calls in %d sessions: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		len(lat), *sessions, ms(pct(lat, 50)), ms(pct(lat, 99)), ms(lat[len(lat)-1]))

	rps, p99 := loadGuard("http://" + addr + "/v1/guard")
	fmt.Printf("/v1/guard on loopback, %d clients, 100 rules: %.0f requests/s, p99 %.2f ms\n", *guardConns, rps, ms(p99))
	return nil
}

func streams(f *anthropictest.Server) int {
	seen := map[string]bool{}
	for _, r := range f.Requests() {
		if strings.HasSuffix(r.Path, "/events/stream") {
			seen[r.Path] = true
		}
	}
	return len(seen)
}

func confirmed(f *anthropictest.Server, ids []string) int {
	n := 0
	for _, id := range ids {
		n += len(f.Confirmations(id))
	}
	return n
}

// latencies pairs each paused call with its confirmation by the fake's processed_at stamps.
func latencies(f *anthropictest.Server, ids []string) []time.Duration {
	var out []time.Duration
	for _, id := range ids {
		paused := map[string]time.Time{}
		for _, e := range f.Events(id) {
			at, _ := time.Parse(time.RFC3339Nano, e["processed_at"].(string))
			switch e["type"] {
			case "agent.tool_use":
				paused[e["id"].(string)] = at
			case "user.tool_confirmation":
				out = append(out, at.Sub(paused[e["tool_use_id"].(string)]))
			}
		}
	}
	slices.Sort(out)
	return out
}

func loadGuard(url string) (float64, time.Duration) {
	body := []byte(`{"tool":"Bash","input":{"command":"go test ./... -count=1"},"surface":"harness"}`)
	var mu sync.Mutex
	var all []time.Duration
	deadline := time.Now().Add(*guardFor)
	var wg sync.WaitGroup
	for range *guardConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
		}()
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

func rss(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// minGoMemory samples goMemory for 5 s and keeps the lowest: the reading closest to just
// after a collection, when the heap holds only live objects.
func minGoMemory(addr string) int64 {
	low := int64(0)
	for i := range 20 {
		if m := goMemory(addr); i == 0 || m < low {
			low = m
		}
		time.Sleep(250 * time.Millisecond)
	}
	return low
}

// goMemory reads go_memstats_heap_inuse_bytes + go_memstats_stack_inuse_bytes from the
// confirmer's /metrics: the memory the Go runtime holds for live objects and goroutine stacks,
// without the collector's slack that RSS includes.
func goMemory(addr string) int64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var total float64
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		for _, name := range []string{"go_memstats_heap_inuse_bytes ", "go_memstats_stack_inuse_bytes "} {
			if rest, ok := strings.CutPrefix(s.Text(), name); ok {
				v, _ := strconv.ParseFloat(rest, 64)
				total += v
			}
		}
	}
	return int64(total)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitHTTP(url string) error {
	return waitFor(20*time.Second, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
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
