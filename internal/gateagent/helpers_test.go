package gateagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/decisionlog/decisionlogtest"
	"github.com/intutic/gate-operator/internal/gateagent/gateagenttest"
	"github.com/intutic/gate-operator/internal/testutil"
)

// running is a Server on a socket, with its records and metrics.
type running struct {
	*Server
	socket  string
	records *testutil.SyncBuffer
	reg     *prometheus.Registry
}

// start runs a Server with o (its records and metrics the test's) on a new socket, until the
// test ends; it is ready when start returns.
func start(t testing.TB, o Options) *running {
	t.Helper()
	r := &running{socket: gateagenttest.SocketPath(t), records: &testutil.SyncBuffer{}, reg: prometheus.NewRegistry()}
	o.Records, o.Registerer, o.Log = r.records, r.reg, logr.Discard()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	r.Server = s
	ln, err := net.Listen("unix", r.socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(t, "the sidecar to be ready", s.Ready)
	return r
}

// ask puts a hook call to the sidecar as gate-client would, with the volume version v.
func (r *running) ask(t *testing.T, req agentproto.Request) agentproto.Response {
	t.Helper()
	if req.Nonce == "" {
		req.Nonce = gateagenttest.Nonce(1)
	}
	if req.Runtime == "" {
		req.Runtime = agentproto.RuntimeClaudeCode
	}
	resp, err := gateagenttest.Ask(r.socket, req)
	if err != nil {
		t.Fatalf("asking the sidecar: %v", err)
	}
	if resp.Nonce != req.Nonce {
		t.Fatalf("answered nonce %q, asked %q", resp.Nonce, req.Nonce)
	}
	return resp
}

// recordLines are the records queued so far, each checked against the record's JSON Schema.
func (r *running) recordLines(t *testing.T) []decisionlog.Record {
	t.Helper()
	r.Server.records.Flush()
	var out []decisionlog.Record
	for line := range strings.SplitSeq(strings.TrimSuffix(r.records.String(), "\n"), "\n") {
		if line != "" {
			out = append(out, decisionlogtest.Validate(t, []byte(line)))
		}
	}
	return out
}

// waitRecords waits for n records (a record is written after its answer is sent) and returns
// them.
func (r *running) waitRecords(t *testing.T, n int) []decisionlog.Record {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d records", n), func() bool { return strings.Count(r.records.String(), "\n") >= n })
	return r.recordLines(t)
}

// counter is the value of the metric name with labels (name{k="v",...}).
func (r *running) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metric
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// waitFor waits up to 10 seconds for cond.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hookAnswer is what a hook printed and its exit status.
type hookAnswer struct {
	stdout, stderr string
	exit           int
}

func answerOf(resp agentproto.Response) hookAnswer {
	return hookAnswer{string(resp.Stdout), string(resp.Stderr), resp.Exit}
}

// runGateHook runs gate-hook as the wrapper runs it today, with args and the hook input.
func runGateHook(t *testing.T, input []byte, args ...string) hookAnswer {
	t.Helper()
	cmd := exec.Command(hookBin, args...)
	cmd.Stdin = bytes.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	exit := 0
	if errors.As(err, &ee) {
		exit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return hookAnswer{stdout.String(), stderr.String(), exit}
}

// gateHookArgs are the arguments the wrapper gives gate-hook for a request's flags.
func gateHookArgs(snapshot string, req agentproto.Request) []string {
	args := []string{"--snapshot", snapshot}
	if req.Workspace != "" {
		args = append(args, "--workspace", req.Workspace)
	}
	if req.Flags.Layers {
		args = append(args, "--layers")
	}
	if req.Flags.ExplicitAllow {
		args = append(args, "--explicit-allow")
	}
	if req.Token != "" {
		args = append(args, "--answer-token", req.Token)
	}
	return args
}
