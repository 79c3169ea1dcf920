// Command bench-hook measures gate-hook's wall time per call, side by side with a no-op static
// Go binary in the same run, runs interleaved so all see the same machine. It writes a realistic
// snapshot of -rules rules (and one rule without a when that blocks TaskStop), or the snapshot
// of the -policy file, with its checked rules file beside it as the bootstrap ConfigMap carries
// it (-checked=false leaves it out), runs each binary -n times on PreToolUse payloads, and
// prints the median and p99 of each. Used by hack/bench-hook.sh.
//
// The paths measured: gate-hook (built without CEL) on calls its prefilters decide alone, and
// on calls that need CEL, which it hands to gate-hook-cel; gate-hook-cel run alone on the same
// calls, as the one binary gate-hook was before; and, with -baseline, other gate-hooks (earlier
// revisions', named by their directories when there are several).
//
// With -agent and -client, it also starts the gate-agent sidecar on the same snapshot and
// measures gate-client (without the wrapper) putting the same calls to it, gate-hook as its
// fall-back. The snapshot is then written as the kubelet publishes a volume (a timestamped
// directory, ..data and symlinks through it) for every contender, since the client asks about
// the version ..data names; the run fails if the fall-back ran once, or if the sidecar did not
// record every call the client made.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

func main() {
	hook := flag.String("hook", "bin/gate-hook", "gate-hook binary (built without CEL, gate-hook-cel beside it)")
	celHook := flag.String("cel", "bin/gate-hook-cel", "gate-hook-cel binary, run alone")
	var baselines []string
	flag.Func("baseline", "another gate-hook to measure side by side, e.g. an earlier revision's (repeatable; named by its directory in the output)", func(s string) error {
		baselines = append(baselines, s)
		return nil
	})
	noop := flag.String("noop", "bin/noop", "no-op binary")
	rules := flag.Int("rules", 100, "rules in the snapshot")
	policy := flag.String("policy", "", "a HarnessAgentPolicy YAML (config/samples/...) whose rules to use instead of -rules realistic ones")
	n := flag.Int("n", 200, "runs of each binary")
	withChecked := flag.Bool("checked", true, "write the checked rules file beside the snapshot, as the bootstrap ConfigMap carries it")
	agent := flag.String("agent", "", "gate-agent binary: start the sidecar on the snapshot and measure -client too (empty: neither)")
	client := flag.String("client", "bin/gate-client", "gate-client binary, measured with -agent")
	flag.Parse()

	dir, err := os.MkdirTemp("", "bench-hook-")
	check(err)
	defer os.RemoveAll(dir)
	meta := gate.PolicyMeta{Policy: "bench/hook", Generation: 1}
	rs := append(gatetest.RealisticRules(*rules), gate.Rule{Name: "no-task-stop", Tools: []string{"TaskStop"}, Action: gate.Block, Reason: "tasks are not stopped by agents"})
	if *policy != "" {
		b, err := os.ReadFile(*policy)
		check(err)
		var hap gatev1.HarnessAgentPolicy
		check(yaml.Unmarshal(b, &hap))
		meta, rs = bootstrap.SnapshotSource(&hap)
	}
	snap, checked, err := gate.BuildSnapshotChecked(meta, rs)
	check(err)
	data, err := snap.Encode()
	check(err)
	files := map[string][]byte{gate.SnapshotFileName: data}
	if *withChecked {
		files[gate.CheckedFileName] = checked
	}
	bundle := writeBundle(dir, files, *agent != "")
	path := filepath.Join(bundle, gate.SnapshotFileName)

	payload := func(tool, input string) []byte {
		return []byte(`{"session_id":"9b2c1f0e-4d1a-4a57-8f0e-1c2d3e4f5a6b","transcript_path":"/home/agent/.claude/projects/w/9b2c.jsonl","cwd":"/workspace","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"` + tool + `","tool_input":` + input + `,"tool_use_id":"toolu_01ABCDEF"}` + "\n")
	}
	bash := func(command string) []byte {
		return payload("Bash", `{"command":"`+command+`","description":"Run it"}`)
	}
	type call struct {
		name    string
		payload []byte
		exit    int
	}
	// The realistic rules: an allowed call, every shell rule ruled out by its prefilter; a call
	// blocked by a rule without a when; a call that needs CEL: one rule's prefilter cannot rule
	// it out, so its CEL is compiled and evaluated (and blocks). A policy from a file (the
	// sample's rules read the call's view): a task-list call no rule is about, an allowed and a
	// blocked shell command, which need CEL.
	calls := []call{
		{"allowed (no CEL)", bash("go test ./... -count=1"), 0},
		{"blocked (no CEL)", payload("TaskStop", `{"task_id":"t1"}`), 2},
		{"blocked (CEL)", bash("rm -rf /data3"), 2},
	}
	if *policy != "" {
		calls = []call{
			{"TodoWrite (no CEL)", payload("TodoWrite", `{"todos":[{"content":"a","status":"pending","activeForm":"doing a"}]}`), 0},
			{"allowed Bash (CEL)", bash("go test ./... -count=1"), 0},
			{"blocked Bash (CEL)", bash("rm -rf /"), 2},
		}
	}

	var cs []*contender
	for _, c := range calls {
		cs = append(cs, &contender{name: "gate-hook, " + c.name, bin: *hook, payload: c.payload, exit: c.exit})
	}
	for _, c := range calls {
		cs = append(cs, &contender{name: "gate-hook-cel alone, " + c.name, bin: *celHook, payload: c.payload, exit: c.exit})
	}
	if *agent != "" {
		for _, c := range calls {
			cs = append(cs, &contender{name: "gate-client + gate-agent, " + c.name, bin: *client, payload: c.payload, exit: c.exit, client: true})
		}
	}
	for _, b := range baselines {
		name := "baseline"
		if len(baselines) > 1 {
			name = filepath.Base(filepath.Dir(b))
		}
		for _, c := range calls {
			cs = append(cs, &contender{name: name + ", " + c.name, bin: b, payload: c.payload, exit: c.exit})
		}
	}
	noopC := &contender{name: "no-op", bin: *noop, payload: calls[0].payload}
	cs = append(cs, noopC)

	// Every binary runs from a copy written here, as an image's layer is unpacked (written, not
	// mapped): on this kernel a binary the Go linker has just written (through a mapping) was
	// measured to start about a millisecond slower than a copy of it, which would bias the
	// comparison towards whichever contender was built elsewhere or earlier.
	copies := map[string]string{}
	for i, c := range cs {
		if copies[c.bin] == "" {
			copies[c.bin] = installCopy(c.bin, filepath.Join(dir, fmt.Sprint("bin", i)))
		}
		c.bin = copies[c.bin]
	}

	var sc *sidecar
	if *agent != "" {
		sc = startSidecar(*agent, bundle, dir)
		defer sc.stop()
	}
	args := func(c *contender) []string {
		if c.client {
			return []string{"--socket", sc.socket, "--runtime", "claude-code", "--fallback", copies[*hook], "--fallback-spool", sc.spool, "--", "--snapshot", path}
		}
		return []string{"--snapshot", path}
	}

	clientRuns := measure(cs, *n, args)
	nm, _ := stats(noopC.times)
	fmt.Printf("snapshot: %d rules, %d bytes, checked rules file: %v (%d bytes); %d runs each, interleaved\n", len(rs), len(data), *withChecked, len(checked), *n)
	for _, c := range cs {
		m, p := stats(c.times)
		fmt.Printf("%-46s median %7.3f ms   p99 %7.3f ms   %5.2fx no-op\n", c.name, ms(m), ms(p), float64(m)/float64(nm))
	}
	bins := []string{*hook, *celHook}
	if sc != nil {
		sc.report(clientRuns)
		bins = append(bins, *client, *agent)
	}
	for _, b := range bins {
		info, err := os.Stat(b)
		check(err)
		fmt.Printf("%s: %.1f MB (%d bytes)\n", b, float64(info.Size())/1e6, info.Size())
	}
}

// contender is a binary measured on one call.
type contender struct {
	name    string
	bin     string
	payload []byte
	exit    int
	times   []time.Duration
	// client is set for gate-client: its arguments come before gate-hook's.
	client bool
}

// measure runs every contender once to warm the page cache, then n times each, interleaved,
// keeping their times; it returns how many times gate-client ran.
func measure(cs []*contender, n int, args func(*contender) []string) (clientRuns int) {
	for i := range n + 1 {
		for _, c := range cs {
			took := run(c.bin, args(c), c.payload, c.exit)
			if i > 0 {
				c.times = append(c.times, took)
			}
			if c.client {
				clientRuns++
			}
		}
	}
	return clientRuns
}

// writeBundle writes the bundle's files into dir, or, with kubelet, into a volume in dir laid
// out as the kubelet lays it out; it returns the bundle's directory.
func writeBundle(dir string, files map[string][]byte, kubelet bool) string {
	if kubelet {
		bundle := filepath.Join(dir, "volume")
		kubeletVolume(bundle, files)
		return bundle
	}
	for name, b := range files {
		check(os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	return dir
}

// kubeletVolume writes files into dir as the kubelet publishes a ConfigMap volume: in a
// timestamped directory that ..data points to, each file a symlink through ..data.
func kubeletVolume(dir string, files map[string][]byte) {
	const version = "..2026_12_04_22_00_00.000000001"
	check(os.MkdirAll(filepath.Join(dir, version), 0o755))
	for name, b := range files {
		check(os.WriteFile(filepath.Join(dir, version, name), b, 0o644))
		check(os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
	}
	check(os.Symlink(version, filepath.Join(dir, "..data")))
}

// sidecar is a running gate-agent.
type sidecar struct {
	cmd                   *exec.Cmd
	socket, spool, record string
}

// startSidecar starts gate-agent on the bundle, its socket, spool and records in dir, and
// waits for it to be ready.
func startSidecar(bin, bundle, dir string) *sidecar {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	health := ln.Addr().String()
	check(ln.Close())
	sc := &sidecar{socket: filepath.Join(dir, "gate.sock"), spool: filepath.Join(dir, "fallback.ndjson"), record: filepath.Join(dir, "records.ndjson")}
	out, err := os.Create(sc.record)
	check(err)
	sc.cmd = exec.Command(bin, "--bundle-dir", bundle, "--socket", sc.socket, "--fallback-spool", sc.spool,
		"--health-bind-address", health, "--metrics-bind-address", "")
	sc.cmd.Stdout = out
	// It dies with the benchmark, whichever way the benchmark ends.
	sc.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	check(sc.cmd.Start())
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + health + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return sc
			}
		}
		if time.Now().After(deadline) {
			sc.stop()
			check(fmt.Errorf("gate-agent was not ready in 30 s"))
		}
	}
}

// report prints how many calls the sidecar recorded and gate-hook fell back on, and fails the
// run unless the sidecar answered all clientRuns calls.
func (sc *sidecar) report(clientRuns int) {
	// The sidecar writes a call's record after its answer: the last may be a moment behind.
	records, fallbacks := sc.counts()
	for deadline := time.Now().Add(2 * time.Second); records < clientRuns && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		records, fallbacks = sc.counts()
	}
	fmt.Printf("gate-agent: %d decision records for %d gate-client runs; fallback spool: %d lines\n", records, clientRuns, fallbacks)
	if fallbacks != 0 || records != clientRuns {
		fmt.Fprintln(os.Stderr, "gate-client did not get every answer from the sidecar: the numbers above measure the fall-back")
		sc.stop()
		os.Exit(1)
	}
}

// counts are the decision records gate-agent wrote and the lines of the fallback spool.
func (sc *sidecar) counts() (records, fallbacks int) {
	lines := func(path string) int {
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return 0
		}
		check(err)
		return strings.Count(string(b), "\n")
	}
	return lines(sc.record), lines(sc.spool)
}

func (sc *sidecar) stop() {
	_ = sc.cmd.Process.Kill()
	_ = sc.cmd.Wait()
}

// installCopy copies bin into the new directory dir, with the gate-hook-cel beside it when
// there is one (gate-hook hands calls that need CEL to the one beside it), and returns the
// copy's path.
func installCopy(bin, dir string) string {
	check(os.MkdirAll(dir, 0o755))
	cp := func(src, dst string) {
		data, err := os.ReadFile(src)
		check(err)
		check(os.WriteFile(dst, data, 0o755))
	}
	out := filepath.Join(dir, filepath.Base(bin))
	cp(bin, out)
	sibling := filepath.Join(filepath.Dir(bin), "gate-hook-cel")
	if _, err := os.Stat(sibling); err == nil && filepath.Base(bin) != "gate-hook-cel" {
		cp(sibling, filepath.Join(dir, "gate-hook-cel"))
	}
	return out
}

// run executes bin once with args and the payload on stdin and returns its wall time. It must
// exit with want; anything else means the benchmark measures the wrong path.
func run(bin string, args []string, payload []byte, want int) time.Duration {
	cmd := exec.Command(bin, args...)
	cmd.Stdin = bytes.NewReader(payload)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if code := cmd.ProcessState.ExitCode(); code != want {
		fmt.Fprintf(os.Stderr, "%s exited %d, want %d: %v: %s\n", bin, code, want, err, stderr.String())
		os.Exit(1)
	}
	return took
}

func stats(ds []time.Duration) (median, p99 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[(len(s)*99+99)/100-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
