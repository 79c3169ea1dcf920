package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateagent/gateagenttest"
)

// BenchmarkResources runs the gate-agent binary as the pod does on two bundles, the sample
// policy and the largest policy the schema admits (512 rules, 160 KiB of rule text, every
// rule with a when), asks it every sample call once, and reports its resident memory (VmRSS
// and VmHWM, from /proc) and the CPU it uses while idle over -idle (utime+stime, from /proc).
// It measures; it asserts nothing about the figures.
//
//	go test -run NONE -bench BenchmarkResources -benchtime 1x ./cmd/gate-agent/
func BenchmarkResources(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "gate-agent")
	if out, err := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	sample, checked, calls := gateagenttest.SamplePolicy(b, root)
	largest, largestChecked := largestPolicy(b)
	for _, tc := range []struct {
		name    string
		snap    *gate.Snapshot
		checked []byte
	}{{"sample", sample, checked}, {"largest", largest, largestChecked}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				measureResources(b, bin, tc.snap, tc.checked, calls)
			}
		})
	}
}

// idle is how long the sidecar's CPU is measured with no calls.
const idle = 10 * time.Second

func measureResources(b *testing.B, bin string, snap *gate.Snapshot, checked []byte, calls []gateagenttest.HookCall) {
	vol := gateagenttest.NewVolume(b, gateagenttest.SnapshotFiles(b, snap, checked, "pod-0"))
	socket := gateagenttest.SocketPath(b)
	health := freeAddr(b)
	cmd := exec.Command(bin, "--bundle-dir", vol.Dir, "--socket", socket, "--fallback-spool", "",
		"--health-bind-address", health, "--metrics-bind-address", "")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + health + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("gate-agent not ready: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, c := range calls {
		if _, err := gateagenttest.Ask(socket, agentproto.Request{Nonce: gateagenttest.Nonce(i), Runtime: agentproto.RuntimeClaudeCode, Version: vol.Version(), Input: c.Input}); err != nil {
			b.Fatalf("call %s: %v", c.Name, err)
		}
	}
	pid := cmd.Process.Pid
	rss, hwm := status(b, pid, "VmRSS:"), status(b, pid, "VmHWM:")
	before := cpuTicks(b, pid)
	time.Sleep(idle)
	after := cpuTicks(b, pid)
	const clockTicks = 100 // USER_HZ on Linux
	b.ReportMetric(float64(rss)/1024, "MiB-rss")
	b.ReportMetric(float64(hwm)/1024, "MiB-peak-rss")
	b.ReportMetric(float64(after-before)/clockTicks/idle.Seconds()*1000, "ms-cpu/s-idle")
	b.ReportMetric(float64(len(snap.Rules)), "rules")
}

// status is a /proc/<pid>/status field in kB.
func status(b *testing.B, pid int, field string) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// cpuTicks is the process's utime+stime in clock ticks (/proc/<pid>/stat fields 14 and 15).
func cpuTicks(b *testing.B, pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: the fields after it are counted.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	utime, err1 := strconv.Atoi(fields[11])
	stime, err2 := strconv.Atoi(fields[12])
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %s", pid, data)
	}
	return utime + stime
}

// largestPolicy is the largest policy the schema admits, as internal/bootstrap's
// TestLargestPolicyFits builds it: 512 rules whose names, reasons and whens add up to the
// schema's 160 KiB, every when a chain of contains() over quoted literals.
func largestPolicy(b *testing.B) (*gate.Snapshot, []byte) {
	const rules = 512 // spec.rules MaxItems
	per := gatev1.MaxRulesTextBytes / rules
	hap := &gatev1.HarnessAgentPolicy{}
	hap.Namespace, hap.Name, hap.Generation = "agents", "largest", 1
	for i := range rules {
		r := gatev1.Rule{Name: fmt.Sprintf("r%d-%s", i, strings.Repeat("x", 40)), Tools: []string{"bash"},
			Action: gatev1.ActionBlock, Reason: strings.Repeat(`"`, 40), Code: "c"}
		var when []string
		for j := 0; len(strings.Join(when, " && ")) < per-len(r.Name)-len(r.Reason)-len("bash")-1-60; j++ {
			when = append(when, fmt.Sprintf(`input.c%d.contains("%s")`, j%10, strings.Repeat(`\"`, 8)))
		}
		r.When = strings.Join(when, " && ")
		hap.Spec.Rules = append(hap.Spec.Rules, r)
	}
	meta, rs := bootstrap.SnapshotSource(hap)
	snap, checked, err := gate.BuildSnapshotChecked(meta, rs)
	if err != nil {
		b.Fatal(err)
	}
	return snap, checked
}
