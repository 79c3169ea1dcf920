// Command bench-hook measures gate-hook's wall time per call, side by side with a no-op static
// Go binary in the same run, runs interleaved so both see the same machine. It writes a
// realistic snapshot of -rules rules, runs each binary -n times on a PreToolUse payload, and
// prints the median and p99 of each. Used by hack/bench-hook.sh.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

func main() {
	hook := flag.String("hook", "bin/gate-hook", "gate-hook binary")
	noop := flag.String("noop", "bin/noop", "no-op binary")
	rules := flag.Int("rules", 100, "rules in the snapshot")
	n := flag.Int("n", 200, "runs of each binary")
	flag.Parse()

	dir, err := os.MkdirTemp("", "bench-hook-")
	check(err)
	defer os.RemoveAll(dir)
	snap, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "bench/hook", Generation: 1}, gatetest.RealisticRules(*rules))
	check(err)
	data, err := snap.Encode()
	check(err)
	path := filepath.Join(dir, gate.SnapshotFileName)
	check(os.WriteFile(path, data, 0o644))

	payload := func(command string) []byte {
		return []byte(`{"session_id":"9b2c1f0e-4d1a-4a57-8f0e-1c2d3e4f5a6b","transcript_path":"/home/agent/.claude/projects/w/9b2c.jsonl","cwd":"/workspace","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"` + command + `","description":"Run it"},"tool_use_id":"toolu_01ABCDEF"}` + "\n")
	}
	// An allowed call: every shell rule is ruled out by its prefilter. A blocked call: one rule's
	// CEL is compiled and evaluated.
	allowed, blocked := payload("go test ./... -count=1"), payload("rm -rf /data3")

	// One warm-up run each, so the page cache holds both binaries.
	run(*hook, path, allowed, 0)
	run(*noop, path, allowed, 0)
	var hookTimes, blockTimes, noopTimes []time.Duration
	for range *n {
		hookTimes = append(hookTimes, run(*hook, path, allowed, 0))
		blockTimes = append(blockTimes, run(*hook, path, blocked, 2))
		noopTimes = append(noopTimes, run(*noop, path, allowed, 0))
	}
	hm, hp := stats(hookTimes)
	bm, bp := stats(blockTimes)
	nm, np := stats(noopTimes)
	info, err := os.Stat(*hook)
	check(err)
	fmt.Printf("snapshot: %d rules, %d bytes; %d runs each, interleaved\n", *rules, len(data), *n)
	fmt.Printf("%-22s median %7.3f ms   p99 %7.3f ms\n", "gate-hook, allowed call", ms(hm), ms(hp))
	fmt.Printf("%-22s median %7.3f ms   p99 %7.3f ms\n", "gate-hook, blocked call", ms(bm), ms(bp))
	fmt.Printf("%-22s median %7.3f ms   p99 %7.3f ms\n", "no-op", ms(nm), ms(np))
	fmt.Printf("ratio to no-op, median: allowed %.2fx, blocked %.2fx\n", float64(hm)/float64(nm), float64(bm)/float64(nm))
	fmt.Printf("gate-hook binary: %.1f MB (%d bytes)\n", float64(info.Size())/1e6, info.Size())
}

// run executes bin once with the payload on stdin and returns its wall time. It must exit with
// want; anything else means the benchmark measures the wrong path.
func run(bin, snapshot string, payload []byte, want int) time.Duration {
	cmd := exec.Command(bin, "--snapshot", snapshot)
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
