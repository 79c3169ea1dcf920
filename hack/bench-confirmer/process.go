package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/intutic/gate-operator/internal/promscrape"
)

// confirmer is one confirmer process of the benchmark.
type confirmer struct {
	name, addr string
	metrics    string // its --metrics-listen
	cmd        *exec.Cmd
	log        *os.File
	pprof      string // its profiling address, with -profile
	done       chan struct{}
}

// startConfirmer starts the binary with s's arguments and extra ones, its log in the temp
// directory, and waits until it is ready.
func startConfirmer(s *setup, name string, extra []string) (*confirmer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	c := &confirmer{name: name, addr: addr, metrics: metrics, done: make(chan struct{})}
	c.cmd = exec.Command(*confirmerBin, append(s.args(addr, metrics), extra...)...)
	if *profileDir != "" {
		if c.pprof, err = freeAddr(); err != nil {
			return nil, err
		}
		c.cmd.Env = append(os.Environ(), "CONFIRMER_PPROF="+c.pprof)
	}
	if c.log, err = os.Create(filepath.Join(os.TempDir(), "bench-confirmer-"+name+".log")); err != nil {
		return nil, err
	}
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.cmd.Start(); err != nil {
		c.log.Close()
		return nil, err
	}
	go func() {
		// Every confirmer is stopped or killed by the benchmark, so Wait's error says only that.
		_ = c.cmd.Wait()
		close(c.done)
	}()
	if err := waitHTTP("http://" + addr + "/readyz"); err != nil {
		c.kill()
		return nil, fmt.Errorf("confirmer %s (log %s): %w", name, c.log.Name(), err)
	}
	return c, nil
}

// stop ends the confirmer as Kubernetes does (SIGTERM), giving it the grace it has in a pod.
func (c *confirmer) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.log.Close()
}

// kill ends the confirmer at once, as a node that dies does.
func (c *confirmer) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
	c.log.Close()
}

func (c *confirmer) rss() int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
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

// liveMemory is the Go memory the confirmer needs: the heap its last collection found
// reachable (go_gc_heap_live_bytes) plus goroutine stacks. It first makes the collector run
// twice, with /v1/guard requests as the garbage, so the reading is of now and the stacks have
// been shrunk to what they use. inUse counts the heap's spans in use instead of its live
// objects (the measure of earlier runs: it adds the garbage made since that collection and
// the spans' unused room). RSS adds the collector's slack (up to the live heap again at the
// default GOGC) and memory the runtime has not returned to the system yet.
func (c *confirmer) liveMemory() (live, inUse int64) {
	start := c.metric("go_gc_cycles_total_gc_cycles_total")
	body := []byte(`{"tool":"Bash","input":{"command":"go test ./... -count=1"},"surface":"harness"}`)
	deadline := time.Now().Add(30 * time.Second)
	for c.metric("go_gc_cycles_total_gc_cycles_total") < start+4 && time.Now().Before(deadline) {
		for range 200 {
			resp, err := http.Post("http://"+c.addr+"/v1/guard", "application/json", bytes.NewReader(body))
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
	stacks := c.metric("go_memstats_stack_inuse_bytes")
	return int64(c.metric("go_gc_heap_live_bytes") + stacks), int64(c.metric("go_memstats_heap_inuse_bytes") + stacks)
}

// metric reads one unlabelled sample from the confirmer's /metrics.
func (c *confirmer) metric(name string) float64 {
	m, _ := promscrape.Scrape("http://" + c.metrics + "/metrics")
	return m[name]
}

// saveProfiles writes the confirmer's heap (after a collection) and goroutine profiles, with
// -profile.
func (c *confirmer) saveProfiles(phase string) error {
	if c.pprof == "" {
		return nil
	}
	for _, p := range []string{"heap?gc=1", "goroutine"} {
		name := strings.TrimSuffix(p, "?gc=1")
		if err := fetch("http://"+c.pprof+"/debug/pprof/"+p, filepath.Join(*profileDir, c.name+"-"+phase+"-"+name+".pprof")); err != nil {
			return err
		}
	}
	return nil
}

// cpuProfile records a CPU profile of the confirmer for up to d (at most 30 s), with -profile;
// the returned function waits for it.
func (c *confirmer) cpuProfile(phase string, d time.Duration) func() {
	if c.pprof == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		secs := max(1, min(30, int(d.Seconds())))
		path := filepath.Join(*profileDir, c.name+"-"+phase+"-cpu.pprof")
		if err := fetch(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", c.pprof, secs), path); err != nil {
			fmt.Fprintln(os.Stderr, "bench-confirmer: CPU profile:", err)
		}
	}()
	return func() { <-done }
}

func fetch(url, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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
