package gateagent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateagent/gateagenttest"
	"github.com/intutic/gate-operator/internal/runtime/runtimes"
)

func sampleVolume(t *testing.T) *gateagenttest.Volume {
	t.Helper()
	files, _ := generation(t, 1)
	return gateagenttest.NewVolume(t, files)
}

// dialIdle opens n connections to the socket that send nothing; they are closed at the end of
// the test.
func dialIdle(t *testing.T, socket string, n int) {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
}

// TestIdleConnectionsDoNotStopHonestCallers: connections that send nothing hold a slot only
// until their request's deadline. With every slot held by one, an honest call waits in the
// backlog and is answered once a deadline frees a slot; with the default bound, a thousand of
// them leave room for it at once: it is answered before any of them has timed out.
func TestIdleConnectionsDoNotStopHonestCallers(t *testing.T) {
	vol := sampleVolume(t)
	t.Run("every slot held", func(t *testing.T) {
		r := start(t, Options{BundleDir: vol.Dir, MaxConnections: 4, RequestTimeout: 300 * time.Millisecond})
		dialIdle(t, r.socket, 4)
		waitFor(t, "the idle connections to be accepted", func() bool { return r.counter(t, "gate_agent_connections_open", nil) == 4 })
		wantBlocked(t, r.ask(t, agentproto.Request{Version: vol.Version(), Input: rm}), "generation 1 forbids rm")
		// The first deadline to pass freed the slot the honest call took; the others pass too.
		waitFor(t, "the 4 idle connections to time out", func() bool {
			return r.counter(t, "gate_agent_connections_total", map[string]string{"result": connTimedOut}) == 4
		})
		if r.counter(t, "gate_agent_accept_waits_total", nil) == 0 {
			t.Error("the accept loop never waited for a slot")
		}
	})
	t.Run("a thousand idle connections", func(t *testing.T) {
		r := start(t, Options{BundleDir: vol.Dir})
		dialIdle(t, r.socket, 1000)
		waitFor(t, "the idle connections to be accepted", func() bool { return r.counter(t, "gate_agent_connections_open", nil) == 1000 })
		wantBlocked(t, r.ask(t, agentproto.Request{Version: vol.Version(), Input: rm}), "generation 1 forbids rm")
		if n := r.counter(t, "gate_agent_connections_total", map[string]string{"result": connTimedOut}); n != 0 {
			t.Errorf("the honest call was answered only after %v idle connections timed out", n)
		}
	})
}

// TestUnansweredRequests: a request that is malformed, or not whole within its deadline, gets
// no answer at all (the client hands the call to gate-hook), and is counted.
func TestUnansweredRequests(t *testing.T) {
	vol := sampleVolume(t)
	r := start(t, Options{BundleDir: vol.Dir, RequestTimeout: 200 * time.Millisecond})
	good, err := agentproto.EncodeRequest(&agentproto.Request{Nonce: gateagenttest.Nonce(1), Runtime: "claude-code", Version: vol.Version(), Input: rm})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, result string
		send         []byte
	}{
		{"garbage", connInvalid, []byte("GET / HTTP/1.1\r\n\r\n")},
		{"a header cut short", connTimedOut, good[:40]},
		{"a body cut short", connTimedOut, good[:len(good)-5]},
		{"two requests", connInvalid, append(append([]byte{}, good...), good...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := r.counter(t, "gate_agent_connections_total", map[string]string{"result": tc.result})
			c, err := net.Dial("unix", r.socket)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(c); err != nil || len(got) != 0 {
				t.Fatalf("answered %q, %v; want the connection closed unanswered", got, err)
			}
			if after := r.counter(t, "gate_agent_connections_total", map[string]string{"result": tc.result}); after != before+1 {
				t.Errorf("%s: %v, want %v", tc.result, after, before+1)
			}
		})
	}
}

// TestUnknownRuntime: a runtime the sidecar does not know is refused in Claude Code's format,
// with the answer line, exactly as a refusal of gate-hook's own is printed.
func TestUnknownRuntime(t *testing.T) {
	vol := sampleVolume(t)
	r := start(t, Options{BundleDir: vol.Dir})
	resp := r.ask(t, agentproto.Request{Runtime: "cursor", Version: vol.Version(), Token: token, Input: rm})
	rt, _ := runtimes.Lookup(runtimes.Default)
	stdout, stderr, exit := rt.Answer(gate.Refuse(gate.CodeInputInvalid, `gate-agent does not know the runtime "cursor", only claude-code, codex, gemini-cli`), token, false)
	if resp.Exit != 2 || exit != 2 || !bytes.Equal(resp.Stdout, stdout) || !bytes.Equal(resp.Stderr, stderr) {
		t.Fatalf("got %+v, want exit 2, %q, %q", resp, stdout, stderr)
	}
	if resp.Version != vol.Version() {
		t.Errorf("a refusal that no version changes is answered under %q, not the request's %q", resp.Version, vol.Version())
	}
}

// panicking is a policy whose decision panics.
type panicking struct{}

func (panicking) Decide(*gate.Call) gate.Decision { panic("the input was " + string(rm)) }

// TestPanicIsRefusal: a decision that panics is a refusal with gate_crashed, whose reason gives
// the panic's type and nothing of its value (which may quote the input).
func TestPanicIsRefusal(t *testing.T) {
	vol := sampleVolume(t)
	r := start(t, Options{BundleDir: vol.Dir})
	r.state.Store(&bundle{version: vol.Version(), policies: map[policyKey]*loadedPolicy{{}: {decider: panicking{}}}})
	resp := r.ask(t, agentproto.Request{Version: vol.Version(), Input: rm})
	if resp.Exit != 2 || string(resp.Stderr) != gate.RefusalPrefix+"gate-agent failed (string)\n" {
		t.Fatalf("got %+v", resp)
	}
	if recs := r.waitRecords(t, 1); len(recs) != 1 || recs[0].Code != gate.CodeGateCrashed {
		t.Fatalf("records %+v", recs)
	}
}

// TestRecords: each decision is one JSON line with who decided what, with which policy and
// version, for which pod, and the input's size and hash, never the input.
func TestRecords(t *testing.T) {
	vol := sampleVolume(t)
	r := start(t, Options{BundleDir: vol.Dir})
	secret := gateagenttest.Payload("Bash", map[string]any{"command": "rm -rf /tmp/sk-ant-SECRET-0123456789"})
	r.ask(t, agentproto.Request{Nonce: gateagenttest.Nonce(7), Version: vol.Version(), Input: secret})
	recs := r.waitRecords(t, 1)
	if strings.Contains(r.records.String(), "SECRET") {
		t.Fatalf("a record holds the input: %s", r.records.String())
	}
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	got := recs[0]
	sum := sha256.Sum256(secret)
	_, s := generation(t, 1)
	if got.Schema != decisionlog.Schema || got.Surface != decisionlog.SurfaceHookSidecar || got.ReportedBy != "gate-agent" || got.Untrusted ||
		got.Runtime != "claude-code" || got.Pod != "coding-agent-0" || got.Namespace != "agents" || got.Policy != s.Policy || s.Policy == "" || got.Digest != s.Digest ||
		got.VolumeVersion != vol.Version() || got.Rule != "no-rm" || got.Verdict != "Block" || got.Enforcement != "enforce" ||
		got.Reason != "generation 1 forbids rm" || got.Tool != "Bash" || got.Session == "" || got.Nonce != gateagenttest.Nonce(7) ||
		got.InputBytes != int64(len(secret)) || got.InputSHA256 != hex.EncodeToString(sum[:]) || got.DecisionID == "" || got.Time == "" {
		t.Fatalf("record %+v", got)
	}
	if r.counter(t, "gate_agent_decisions_total", map[string]string{"verdict": "Block", "rule": "no-rm", "mode": "enforce"}) != 1 {
		t.Error("the decision is not counted by verdict and rule")
	}
}

// TestRecordedInputIsTheToolInput: under a policy that opts into input, the sidecar's record
// holds the tool input (not the hook's whole payload, so the policy's pointers mean what they
// mean on every surface), masked.
func TestRecordedInputIsTheToolInput(t *testing.T) {
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1,
		RecordInput: &gate.InputRecording{Erase: []string{"/content"}, Hash: []string{"/file_path"}}},
		[]gate.Rule{{Name: "writes", Tools: []string{"Write"}, Action: gate.Allow}})
	if err != nil {
		t.Fatal(err)
	}
	vol := gateagenttest.NewVolume(t, gateagenttest.SnapshotFiles(t, s, nil, "coding-agent-0"))
	r := start(t, Options{BundleDir: vol.Dir})
	payload := gateagenttest.Payload("Write", map[string]any{"file_path": "/w/SECRET-PATH", "content": "SECRET-TEXT", "mode": "create"})
	r.ask(t, agentproto.Request{Nonce: gateagenttest.Nonce(1), Version: vol.Version(), Input: payload})
	recs := r.waitRecords(t, 1)
	if strings.Contains(r.records.String(), "SECRET") {
		t.Fatalf("a masked member is in the record: %s", r.records.String())
	}
	sum := sha256.Sum256([]byte(`"/w/SECRET-PATH"`))
	want := `{"file_path":"sha256:` + hex.EncodeToString(sum[:]) + `","mode":"create"}`
	if got := recs[0]; string(got.Input) != want || strings.Join(got.Erased, ",") != "/content" || strings.Join(got.Masked, ",") != "/file_path" {
		t.Fatalf("input %s, erased %v, masked %v; want %s", got.Input, got.Erased, got.Masked, want)
	}
}

// TestShutdownFinishesInFlight: once Run is told to stop it accepts nothing more, answers the
// request it is reading, and returns.
func TestShutdownFinishesInFlight(t *testing.T) {
	vol := sampleVolume(t)
	socket := gateagenttest.SocketPath(t)
	s, err := New(Options{BundleDir: vol.Dir, Records: io.Discard, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ln) }()
	waitFor(t, "the sidecar to be ready", s.Ready)

	msg, err := agentproto.EncodeRequest(&agentproto.Request{Nonce: gateagenttest.Nonce(1), Runtime: "claude-code", Version: vol.Version(), Input: rm})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(msg[:20]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the connection to be accepted", func() bool {
		var m dto.Metric
		return s.metrics.open.Write(&m) == nil && m.GetGauge().GetValue() == 1
	})
	cancel()
	waitFor(t, "the socket to be closed", func() bool {
		c, err := net.Dial("unix", socket)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if _, err := c.Write(msg[20:]); err != nil {
		t.Fatal(err)
	}
	resp, err := agentproto.ReadResponse(c)
	if err != nil || resp.Exit != 2 {
		t.Fatalf("the request in flight: %+v, %v", resp, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
