// Command bench-confirmer measures the confirmer binary against the in-process Sessions API
// fake, which speaks HTTP/2 over TLS as the real API does (hack/bench-confirmer.sh builds and
// runs it):
//
//  1. memory per watched session: the confirmer's Go heap in use plus goroutine stacks (and its
//     RSS) with N streamed sessions versus none;
//  2. pause-to-confirmation latency (p50, p99, max) under a steady load: sessions chosen at
//     random pause on a call, -rate pauses a second in all (a Poisson process), for -duration;
//     from the pause's processed_at to the confirmation's, both stamped by the fake;
//  3. the same latency when every session pauses on -burst-calls calls at once (a stress
//     case: it measures throughput more than latency);
//  4. /v1/guard throughput on loopback, in requests per second, with p99 latency.
//
// With -replicas N (above 1) the confirmers share the sessions through a members Lease on a
// throwaway API server instead (replicas.go): how the sessions spread, the steady latency,
// and what happens when one replica is killed and another leaves gracefully mid-load: how
// long its sessions go unwatched, and whether any call is confirmed twice or not at all.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

var (
	confirmerBin = flag.String("confirmer", "bin/confirmer", "confirmer binary")
	sessions     = flag.Int("sessions", 2000, "concurrent sessions")
	rate         = flag.Float64("rate", 400, "pauses a second across all sessions in the steady phase")
	duration     = flag.Duration("duration", 20*time.Second, "length of the steady phase")
	burstCalls   = flag.Int("burst-calls", 5, "calls each session pauses on at once in the burst phase (0 skips it)")
	guardFor     = flag.Duration("guard-duration", 10*time.Second, "how long /v1/guard is loaded (0 skips it)")
	guardConns   = flag.Int("guard-clients", 8, "concurrent /v1/guard clients")
	replicas     = flag.Int("replicas", 1, "confirmer replicas; above 1 they share the sessions through a Lease on a throwaway API server")
	profileDir   = flag.String("profile", "", "write heap, goroutine and CPU profiles of the confirmer here (needs a binary built with -tags benchpprof)")
)

const apiKey = "sk-ant-bench"

func main() {
	flag.Parse()
	var err error
	if *replicas > 1 {
		err = runReplicas()
	} else {
		err = run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-confirmer:", err)
		os.Exit(1)
	}
}

// setup starts the fake and writes what a confirmer needs into a temporary directory.
type setup struct {
	fake *anthropictest.Server
	dir  string
	ids  []string
}

func newSetup() (*setup, error) {
	fake := anthropictest.NewTLS(apiKey)
	fake.RecordRequests(false)
	// A second confirmation of a call is recorded, not refused: the benchmark counts them.
	fake.AcceptDuplicateConfirmations(true)
	dir, err := os.MkdirTemp("", "bench-confirmer-")
	if err != nil {
		fake.Close()
		return nil, err
	}
	s := &setup{fake: fake, dir: dir}
	snap, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "bench/p", Generation: 1}, gatetest.RealisticRules(100))
	if err != nil {
		s.close()
		return nil, err
	}
	data, _ := snap.Encode()
	for name, content := range map[string][]byte{gate.SnapshotFileName: data, "key": []byte(apiKey)} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			s.close()
			return nil, err
		}
	}
	if err := fake.WriteCA(filepath.Join(dir, "ca.pem")); err != nil {
		s.close()
		return nil, err
	}
	s.ids = make([]string, *sessions)
	for i := range s.ids {
		s.ids[i] = fmt.Sprintf("sesn_bench_%04d", i)
	}
	return s, nil
}

func (s *setup) close() {
	s.fake.Close()
	_ = os.RemoveAll(s.dir)
}

// args are a confirmer's arguments, with the production defaults for every interval.
func (s *setup) args(addr, metrics string) []string {
	return []string{"--listen", addr, "--metrics-listen", metrics, "--insecure-no-auth",
		"--snapshot", filepath.Join(s.dir, gate.SnapshotFileName),
		"--anthropic-base-url", s.fake.URL, "--anthropic-api-key-file", filepath.Join(s.dir, "key"),
		"--anthropic-ca-file", filepath.Join(s.dir, "ca.pem"),
		"--agent-ids", "agent_bench", "--max-streams", strconv.Itoa(*sessions + 10)}
}

func (s *setup) addSessions() {
	for _, id := range s.ids {
		s.fake.AddSession(id, "agent_bench")
	}
}

func run() error {
	s, err := newSetup()
	if err != nil {
		return err
	}
	defer s.close()
	c, err := startConfirmer(s, "single", nil)
	if err != nil {
		return err
	}
	defer c.stop()

	rss0 := c.rss()
	go0, use0 := c.liveMemory()
	s.addSessions()
	if err := waitFor(60*time.Second, func() bool { return s.fake.StreamingSessions() >= *sessions }); err != nil {
		return fmt.Errorf("streams: %d of %d open: %w", s.fake.StreamingSessions(), *sessions, err)
	}
	perSession := func(a, b int64) float64 { return float64(b-a) / 1024 / float64(*sessions) }
	memory := func(when string) {
		rss1 := c.rss()
		go1, use1 := c.liveMemory()
		fmt.Printf("memory %s: Go live heap + stacks %.1f MiB idle, %.1f MiB streaming %d sessions: %.1f KiB per watched session"+
			" (stacks %.1f MiB, %.0f goroutines; heap in use + stacks: %.1f KiB per session); RSS %.1f MiB idle, %.1f MiB streaming: %.1f KiB per session\n",
			when, mib(go0), mib(go1), *sessions, perSession(go0, go1),
			mib(int64(c.metric("go_memstats_stack_inuse_bytes"))), c.metric("go_goroutines"), perSession(use0, use1),
			mib(rss0), mib(rss1), perSession(rss0, rss1))
	}
	memory("with every stream open")
	if err := c.saveProfiles("streaming"); err != nil {
		return err
	}

	stopCPU := c.cpuProfile("steady", *duration)
	calls := steady(s.fake, s.ids, *rate, *duration)
	stopCPU()
	if err := report(s.fake, "steady", fmt.Sprintf("%.0f pauses/s for %s", *rate, *duration), calls); err != nil {
		return err
	}
	memory("after the steady load")
	if *burstCalls > 0 {
		if err := report(s.fake, "burst", fmt.Sprintf("every session pausing on %d calls at once", *burstCalls), burst(s.fake, s.ids, *burstCalls)); err != nil {
			return err
		}
	}
	if *guardFor > 0 {
		rps, p99 := loadGuard("http://" + c.addr + "/v1/guard")
		fmt.Printf("/v1/guard on loopback, %d clients, 100 rules: %.0f requests/s, p99 %.2f ms\n", *guardConns, rps, ms(p99))
	}
	return nil
}
