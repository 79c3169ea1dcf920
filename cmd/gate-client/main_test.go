package main

// These tests build the real gate-client and run it as the wrapper will: the hook JSON on
// stdin, the answer read from stdout, stderr and the exit status. Its fall-back is a stand-in
// for gate-hook that records that it ran, with which arguments and stdin, and answers with a
// refusal of its own, so every test can tell who answered.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateagent"
	"github.com/intutic/gate-operator/internal/gateagent/gateagenttest"
	"github.com/intutic/gate-operator/internal/runtime/runtimes"
)

// clientBin is gate-client as the images ship it; hookBin is gate-hook (built without CEL,
// gate-hook-cel beside it), which the success path is compared with.
var clientBin, hookBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gate-client-test-")
	if err != nil {
		panic(err)
	}
	clientBin, hookBin = filepath.Join(dir, "gate-client"), filepath.Join(dir, "gate-hook")
	for _, b := range []struct{ out, tags, pkg string }{{clientBin, "", "."}, {hookBin, "nocel", "../gate-hook"}, {filepath.Join(dir, "gate-hook-cel"), "", "../gate-hook"}} {
		build := exec.Command("go", "build", "-tags", b.tags, "-o", b.out, b.pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			os.Stderr.Write(out)
			panic(err)
		}
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.RemoveAll(dir); os.Exit(code) }))
}

const token = "0b8e2a4c-5d6f-4a1b-9c3d-7e8f9a0b1c2d"

// fallbackAnswer is what the stand-in gate-hook prints; it exits 2.
const fallbackAnswer = "stand-in gate-hook answered\n"

// fakeHook is a stand-in gate-hook: a script that records its arguments and stdin in its
// directory and refuses the call.
type fakeHook struct{ path, dir string }

func newFakeHook(t *testing.T) fakeHook {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "gate-hook")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + dir + "/args\ncat > " + dir + "/stdin\nprintf '" + strings.TrimSuffix(fallbackAnswer, "\n") + "\\n'\nexit 2\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return fakeHook{path, dir}
}

// ran reports whether the stand-in ran, and with which arguments and stdin.
func (f fakeHook) ran(t *testing.T) (args []string, stdin []byte, ran bool) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(f.dir, "args"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	stdin, err = os.ReadFile(filepath.Join(f.dir, "stdin"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n"), stdin, true
}

type result struct {
	stdout, stderr string
	exit           int
	took           time.Duration
}

// runClient runs gate-client with its arguments, then "--" and gate-hook's, and the input.
func runClient(t *testing.T, input []byte, clientArgs []string, hookArgs ...string) result {
	t.Helper()
	cmd := exec.Command(clientBin, append(append(clientArgs, "--"), hookArgs...)...)
	cmd.Stdin = bytes.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	begin := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(begin)}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// runHook runs gate-hook as the wrapper runs it without the sidecar.
func runHook(t *testing.T, input []byte, args ...string) result {
	t.Helper()
	cmd := exec.Command(hookBin, args...)
	cmd.Stdin = bytes.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r result) answer() result { return result{stdout: r.stdout, stderr: r.stderr, exit: r.exit} }

// policy blocks rm, asks for curl and allows the rest.
func policy(t *testing.T) *gate.Snapshot {
	t.Helper()
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1, WorkspaceID: "ws_123"}, []gate.Rule{
		{Name: "no-rm", Tools: []string{"bash"}, When: `input.command.contains("rm ")`, Action: gate.Block, Reason: "no rm here"},
		{Name: "curl-asks", Tools: []string{"bash"}, When: `input.command.contains("curl")`, Action: gate.Ask, Reason: "curl needs a human"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	rm   = gateagenttest.Payload("Bash", map[string]any{"command": "rm -rf /tmp/x"})
	curl = gateagenttest.Payload("Bash", map[string]any{"command": "curl https://example.com"})
	ls   = gateagenttest.Payload("Bash", map[string]any{"command": "ls"})
)

// sidecar is the real gate-agent server on a socket, until the test ends.
type sidecar struct {
	socket string
	reg    *prometheus.Registry
}

func startSidecar(t *testing.T, dir string) sidecar {
	t.Helper()
	sc := sidecar{socket: gateagenttest.SocketPath(t), reg: prometheus.NewRegistry()}
	s, err := gateagent.New(gateagent.Options{BundleDir: dir, Records: &bytes.Buffer{}, Log: logr.Discard(), Registerer: sc.reg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sc.socket)
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
	return sc
}

// gauge is the value of an unlabelled gauge of the sidecar's.
func (sc sidecar) gauge(t *testing.T, name string) float64 {
	t.Helper()
	families, err := sc.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// clientArgs are gate-client's arguments as the wrapper gives them.
func clientArgs(socket string, hook fakeHook, spool string, deadlineMS int) []string {
	return []string{"--socket", socket, "--runtime", "claude-code", "--deadline-ms", fmt.Sprint(deadlineMS), "--fallback", hook.path, "--fallback-spool", spool}
}

// TestAnswersAsTheSidecar: through the real sidecar, the client prints exactly the sidecar's
// answer and exits with its status, never running its fall-back; and that answer is gate-hook's
// for the same call and flags.
func TestAnswersAsTheSidecar(t *testing.T) {
	vol := gateagenttest.NewVolume(t, gateagenttest.SnapshotFiles(t, policy(t), nil, "coding-agent-0"))
	sc := startSidecar(t, vol.Dir)
	for _, tc := range []struct {
		name  string
		input []byte
		req   agentproto.Request
	}{
		{"block", rm, agentproto.Request{Token: token}},
		{"ask", curl, agentproto.Request{Token: token}},
		{"allow", ls, agentproto.Request{Token: token}},
		{"allow, explicitly, without a token", ls, agentproto.Request{Flags: agentproto.Flags{ExplicitAllow: true}}},
		{"workspace bound", rm, agentproto.Request{Token: token, Workspace: "ws_123"}},
		{"another workspace", ls, agentproto.Request{Token: token, Workspace: "ws_999"}},
		{"malformed input", []byte(`{"tool_name":`), agentproto.Request{Token: token}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hookArgs := []string{"--snapshot", vol.SnapshotPath()}
			if tc.req.Workspace != "" {
				hookArgs = append(hookArgs, "--workspace="+tc.req.Workspace)
			}
			if tc.req.Flags.ExplicitAllow {
				hookArgs = append(hookArgs, "--explicit-allow")
			}
			if tc.req.Token != "" {
				hookArgs = append(hookArgs, "--answer-token", tc.req.Token)
			}
			hook := newFakeHook(t)
			got := runClient(t, tc.input, clientArgs(sc.socket, hook, filepath.Join(t.TempDir(), "spool"), 1500), hookArgs...)
			if _, _, ran := hook.ran(t); ran {
				t.Fatalf("the fall-back ran: %+v", got)
			}
			req := tc.req
			req.Nonce, req.Runtime, req.Version, req.Input = gateagenttest.Nonce(1), agentproto.RuntimeClaudeCode, vol.Version(), tc.input
			resp, err := gateagenttest.Ask(sc.socket, req)
			if err != nil {
				t.Fatal(err)
			}
			if want := (result{stdout: string(resp.Stdout), stderr: string(resp.Stderr), exit: resp.Exit}); got.answer() != want {
				t.Fatalf("gate-client answered\n%+v\nthe sidecar answers\n%+v", got.answer(), want)
			}
			if want := runHook(t, tc.input, hookArgs...); got.answer() != want {
				t.Fatalf("gate-client answered\n%+v\ngate-hook answers\n%+v", got.answer(), want)
			}
		})
	}
}

// TestAnswersAsTheSidecarForEachRuntime: for Codex and Gemini CLI, whose wrapper tells both the
// client and gate-hook the runtime, the client prints the sidecar's answer in that runtime's
// format, and it is gate-hook's.
func TestAnswersAsTheSidecarForEachRuntime(t *testing.T) {
	vol := gateagenttest.NewVolume(t, gateagenttest.SnapshotFiles(t, policy(t), nil, "coding-agent-0"))
	sc := startSidecar(t, vol.Dir)
	for _, tc := range []struct {
		runtime, name string
		input         []byte
	}{
		{"codex", "block", []byte(`{"hook_event_name":"PreToolUse","cwd":"/workspace","tool_name":"Bash","tool_input":{"command":"rm -rf /"}}`)},
		{"codex", "ask", []byte(`{"hook_event_name":"PreToolUse","cwd":"/workspace","tool_name":"Bash","tool_input":{"command":"curl https://example.org/x"}}`)},
		{"codex", "allow", []byte(`{"hook_event_name":"PreToolUse","cwd":"/workspace","tool_name":"Bash","tool_input":{"command":"ls"}}`)},
		{"gemini-cli", "block", []byte(`{"hook_event_name":"BeforeTool","cwd":"/workspace","tool_name":"run_shell_command","tool_input":{"command":"rm -rf /"}}`)},
		{"gemini-cli", "allow", []byte(`{"hook_event_name":"BeforeTool","cwd":"/workspace","tool_name":"read_file","tool_input":{"file_path":"README.md"}}`)},
		{"gemini-cli", "Claude Code's input", rm},
	} {
		t.Run(tc.runtime+" "+tc.name, func(t *testing.T) {
			hookArgs := []string{"--snapshot", vol.SnapshotPath(), "--answer-token", token, "--runtime", tc.runtime}
			args := clientArgs(sc.socket, newFakeHook(t), filepath.Join(t.TempDir(), "spool"), 1500)
			args[3] = tc.runtime
			hook := newFakeHook(t)
			args[7] = hook.path
			got := runClient(t, tc.input, args, hookArgs...)
			if _, _, ran := hook.ran(t); ran {
				t.Fatalf("the fall-back ran: %+v", got)
			}
			if want := runHook(t, tc.input, hookArgs...); got.answer() != want {
				t.Fatalf("gate-client answered\n%+v\ngate-hook answers\n%+v", got.answer(), want)
			}
			if got.exit == 2 && tc.runtime == "gemini-cli" && !strings.Contains(got.stdout, `{"decision":"deny"`) {
				t.Fatalf("a Gemini CLI deny must be its JSON: %+v", got)
			}
		})
	}
}

// fakeSidecar listens on a socket and answers each connection with answer, given the request
// it read (nil when it could not read one).
func fakeSidecar(t *testing.T, answer func(net.Conn, *agentproto.Request)) string {
	t.Helper()
	socket := gateagenttest.SocketPath(t)
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	conns := make(chan net.Conn, 16)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			req, err := agentproto.ReadRequest(c, nil)
			if err != nil {
				answer(c, nil)
				continue
			}
			answer(c, &req)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		close(conns)
		for c := range conns {
			c.Close()
		}
	})
	return socket
}

// respond writes a response to req, edited by edit, and closes the connection.
func respond(edit func(*agentproto.Response)) func(net.Conn, *agentproto.Request) {
	return func(c net.Conn, req *agentproto.Request) {
		defer c.Close()
		if req == nil {
			return
		}
		resp := agentproto.Response{Nonce: req.Nonce, Version: req.Version, Exit: 0, Stdout: []byte("sidecar answered\n")}
		edit(&resp)
		msg, err := agentproto.EncodeResponse(&resp)
		if err != nil {
			panic(err)
		}
		_, _ = c.Write(msg)
	}
}

// TestFailuresFallBack: whatever goes wrong with the sidecar, the client hands the call to
// gate-hook (exec, same pid) with gate-hook's arguments after the reason and the spool, and the
// input it read, within its deadline; gate-hook's answer is the answer. Nothing the broken
// sidecar said reaches stdout.
func TestFailuresFallBack(t *testing.T) {
	vol := gateagenttest.NewVolume(t, map[string][]byte{gate.SnapshotFileName: []byte("unused")})
	const deadline = 400
	stale := gateagenttest.SocketPath(t)
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()

	for _, tc := range []struct {
		name, reason string
		socket       func(t *testing.T) string
	}{
		{"sidecar absent", agentproto.FallbackUnreachable, func(t *testing.T) string { return filepath.Join(t.TempDir(), "absent.sock") }},
		{"socket refuses", agentproto.FallbackUnreachable, func(*testing.T) string { return stale }},
		{"accepts, never answers", agentproto.FallbackTimeout, func(t *testing.T) string {
			return fakeSidecar(t, func(net.Conn, *agentproto.Request) {})
		}},
		{"never accepts", agentproto.FallbackTimeout, func(t *testing.T) string {
			socket := gateagenttest.SocketPath(t)
			ln, err := net.Listen("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			return socket
		}},
		{"killed mid-answer", agentproto.FallbackGarbage, func(t *testing.T) string {
			return fakeSidecar(t, func(c net.Conn, req *agentproto.Request) {
				defer c.Close()
				if req == nil {
					return
				}
				msg, _ := agentproto.EncodeResponse(&agentproto.Response{Nonce: req.Nonce, Version: req.Version, Stdout: []byte("sidecar answered\n")})
				_, _ = c.Write(msg[:len(msg)/2])
			})
		}},
		{"closes without answering", agentproto.FallbackGarbage, func(t *testing.T) string {
			return fakeSidecar(t, func(c net.Conn, _ *agentproto.Request) { c.Close() })
		}},
		{"wrong nonce", agentproto.FallbackGarbage, func(t *testing.T) string {
			return fakeSidecar(t, respond(func(r *agentproto.Response) { r.Nonce = strings.Repeat("f", 32) }))
		}},
		{"another version", agentproto.FallbackVersion, func(t *testing.T) string {
			return fakeSidecar(t, respond(func(r *agentproto.Response) { r.Version = "..2026_12_31_00_00_00.000000001" }))
		}},
		{"no version", agentproto.FallbackVersion, func(t *testing.T) string {
			return fakeSidecar(t, respond(func(r *agentproto.Response) { r.Version = agentproto.NoVersion }))
		}},
		{"garbage", agentproto.FallbackGarbage, func(t *testing.T) string {
			return fakeSidecar(t, func(c net.Conn, _ *agentproto.Request) {
				defer c.Close()
				_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
			})
		}},
		{"oversized", agentproto.FallbackGarbage, func(t *testing.T) string {
			return fakeSidecar(t, func(c net.Conn, req *agentproto.Request) {
				defer c.Close()
				if req == nil {
					return
				}
				_, _ = fmt.Fprintf(c, "gate-agent/1\nnonce %s\nversion %s\ndigest -\nexit 0\nstdout %d\nstderr 0\n\n", req.Nonce, req.Version, agentproto.MaxAnswer+1)
				_, _ = c.Write(make([]byte, 64<<10))
			})
		}},
		{"slow past the deadline", agentproto.FallbackTimeout, func(t *testing.T) string {
			return fakeSidecar(t, func(c net.Conn, req *agentproto.Request) {
				time.Sleep(deadline*time.Millisecond + 300*time.Millisecond)
				respond(func(*agentproto.Response) {})(c, req)
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := newFakeHook(t)
			spool := filepath.Join(t.TempDir(), "spool")
			hookArgs := []string{"--snapshot", vol.SnapshotPath(), "--layers", "--answer-token", token}
			got := runClient(t, rm, clientArgs(tc.socket(t), hook, spool, deadline), hookArgs...)
			wantFellBack(t, hook, got, rm, append([]string{"--fallback-reason", tc.reason, "--fallback-spool", spool}, hookArgs...))
			if got.took > deadline*time.Millisecond+time.Second {
				t.Errorf("took %v, past the deadline of %d ms", got.took, deadline)
			}
		})
	}
}

// wantFellBack checks that the stand-in gate-hook answered, with args and the input.
func wantFellBack(t *testing.T, hook fakeHook, got result, input []byte, args []string) {
	t.Helper()
	ranArgs, stdin, ran := hook.ran(t)
	if !ran {
		t.Fatalf("the fall-back did not run: %+v", got)
	}
	if got.stdout != fallbackAnswer || got.exit != 2 {
		t.Errorf("answered %+v, want the fall-back's answer alone", got)
	}
	if strings.Join(ranArgs, "\x00") != strings.Join(args, "\x00") {
		t.Errorf("the fall-back ran with %q, want %q", ranArgs, args)
	}
	if !bytes.Equal(stdin, input) {
		t.Errorf("the fall-back read %d bytes, want the %d of the input", len(stdin), len(input))
	}
}

// TestWhenNotToAsk: the client hands the call to gate-hook without asking the sidecar when the
// bundle is not a kubelet volume, when gate-hook's arguments hold what it does not forward as
// it is, and when the input is larger than gate-hook reads.
func TestWhenNotToAsk(t *testing.T) {
	vol := gateagenttest.NewVolume(t, map[string][]byte{gate.SnapshotFileName: []byte("unused")})
	var asked atomic.Int32
	socket := fakeSidecar(t, func(c net.Conn, _ *agentproto.Request) { asked.Add(1); c.Close() })
	plain := t.TempDir()
	large := gateagenttest.Payload("Write", map[string]any{"file_path": "/w/big", "content": strings.Repeat("a", agentproto.MaxInput)})
	for _, tc := range []struct {
		name, reason string
		input        []byte
		hookArgs     []string
	}{
		{"not a kubelet volume", agentproto.FallbackNoVolume, rm, []string{"--snapshot", filepath.Join(plain, gate.SnapshotFileName)}},
		{"an unknown flag", agentproto.FallbackArgs, rm, []string{"--snapshot", vol.SnapshotPath(), "--allow-everything"}},
		{"a flag twice", agentproto.FallbackArgs, rm, []string{"--snapshot", vol.SnapshotPath(), "--snapshot", "/etc/passwd"}},
		{"a positional argument", agentproto.FallbackArgs, rm, []string{"--snapshot", vol.SnapshotPath(), "extra"}},
		{"another snapshot file", agentproto.FallbackArgs, rm, []string{"--snapshot", filepath.Join(vol.Dir, "other.rules")}},
		{"a token of -", agentproto.FallbackArgs, rm, []string{"--snapshot", vol.SnapshotPath(), "--answer-token", "-"}},
		{"a workspace with a space", agentproto.FallbackArgs, rm, []string{"--snapshot", vol.SnapshotPath(), "--workspace", "ws 1"}},
		{"no snapshot named", agentproto.FallbackArgs, rm, []string{"--answer-token", token}},
		{"gate-hook told another runtime than the client", agentproto.FallbackArgs, rm, []string{"--snapshot", vol.SnapshotPath(), "--runtime", "codex"}},
		{"a runtime the protocol cannot carry", agentproto.FallbackArgs, rm, []string{"--snapshot", vol.SnapshotPath(), "--runtime", "Codex CLI"}},
		{"input over 4 MiB", agentproto.FallbackInputTooLarge, large, []string{"--snapshot", vol.SnapshotPath()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := newFakeHook(t)
			spool := filepath.Join(t.TempDir(), "spool")
			got := runClient(t, tc.input, clientArgs(socket, hook, spool, 1500), tc.hookArgs...)
			input := tc.input
			if len(input) > agentproto.MaxInput {
				input = input[:agentproto.MaxInput+1] // what gate-hook needs to refuse it
			}
			wantFellBack(t, hook, got, input, append([]string{"--fallback-reason", tc.reason, "--fallback-spool", spool}, tc.hookArgs...))
		})
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the sidecar was asked %d times", n)
	}
}

// TestRefusesWhenNothingCanDecide: when gate-hook cannot be started, or the client's own
// arguments are wrong, the client refuses the call as the wrapper would, with the answer line.
func TestRefusesWhenNothingCanDecide(t *testing.T) {
	vol := gateagenttest.NewVolume(t, map[string][]byte{gate.SnapshotFileName: []byte("unused")})
	hookArgs := []string{"--snapshot", vol.SnapshotPath(), "--answer-token", token}
	absent := filepath.Join(t.TempDir(), "gate-hook")
	for _, tc := range []struct {
		name, reason string
		args         []string
	}{
		{"gate-hook missing", "gate-client could not start gate-hook", []string{"--socket", filepath.Join(t.TempDir(), "absent.sock"), "--runtime", "claude-code", "--fallback", absent}},
		{"no fall-back named", "gate-client was started with invalid arguments", []string{"--socket", "/x.sock", "--runtime", "claude-code"}},
		{"an unknown client flag", "gate-client was started with invalid arguments", []string{"--socket", "/x.sock", "--runtime", "claude-code", "--fallback", absent, "--insecure", "1"}},
		{"a deadline past its bound", "gate-client was started with invalid arguments", []string{"--socket", "/x.sock", "--runtime", "claude-code", "--fallback", absent, "--deadline-ms", "60000"}},
		{"gate-hook missing, for Codex", "gate-client could not start gate-hook", []string{"--socket", filepath.Join(t.TempDir(), "absent.sock"), "--runtime", "codex", "--fallback", absent}},
		{"gate-hook missing, for Gemini CLI", "gate-client could not start gate-hook", []string{"--socket", filepath.Join(t.TempDir(), "absent.sock"), "--runtime", "gemini-cli", "--fallback", absent}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runClient(t, rm, tc.args, hookArgs...)
			rt, _ := runtimes.Lookup(tc.args[3])
			stdout, stderr, exit := rt.Answer(gate.Refuse(gate.CodeGateCrashed, tc.reason), token, false)
			if got.answer() != (result{stdout: string(stdout), stderr: string(stderr), exit: exit}) || exit != 2 {
				t.Fatalf("got %+v, want %q %q exit 2", got, stdout, stderr)
			}
		})
	}
}

// TestFallBackToGateHook: with no sidecar, the real gate-hook decides the call from the input
// the client read (handed over in a memfd, through gate-hook-cel when the call needs CEL),
// answers exactly as it does alone, and records in the spool why it was asked.
func TestFallBackToGateHook(t *testing.T) {
	vol := gateagenttest.NewVolume(t, gateagenttest.SnapshotFiles(t, policy(t), nil, ""))
	spool := filepath.Join(t.TempDir(), "spool")
	args := []string{"--socket", filepath.Join(t.TempDir(), "absent.sock"), "--runtime", "claude-code", "--fallback", hookBin, "--fallback-spool", spool}
	for i, input := range [][]byte{rm, curl, ls} {
		hookArgs := []string{"--snapshot", vol.SnapshotPath(), "--answer-token", token}
		got := runClient(t, input, args, hookArgs...)
		if want := runHook(t, input, hookArgs...); got.answer() != want {
			t.Fatalf("call %d: gate-client answered %+v, gate-hook %+v", i, got.answer(), want)
		}
	}
	data, err := os.ReadFile(spool)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n"); len(lines) != 3 || !strings.Contains(lines[0], `"reason":"sidecar-unreachable"`) || !strings.Contains(lines[0], `"verdict":"Block"`) {
		t.Fatalf("spool %s", data)
	}
}

// TestIdleFlood: a thousand connections held open on the real sidecar, sending nothing, do not
// keep the client from its answer: the sidecar answers it (the fall-back does not run), at once.
func TestIdleFlood(t *testing.T) {
	vol := gateagenttest.NewVolume(t, gateagenttest.SnapshotFiles(t, policy(t), nil, ""))
	sc := startSidecar(t, vol.Dir)
	idle := make([]net.Conn, 0, 1000)
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 1000 {
		c, err := net.Dial("unix", sc.socket)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	waitFor(t, "the idle connections to be accepted", func() bool { return sc.gauge(t, "gate_agent_connections_open") == 1000 })
	hook := newFakeHook(t)
	hookArgs := []string{"--snapshot", vol.SnapshotPath(), "--answer-token", token}
	got := runClient(t, rm, clientArgs(sc.socket, hook, filepath.Join(t.TempDir(), "spool"), 1500), hookArgs...)
	if _, _, ran := hook.ran(t); ran {
		t.Fatalf("the fall-back answered beside the idle connections: %+v", got)
	}
	if want := runHook(t, rm, hookArgs...); got.answer() != want {
		t.Fatalf("gate-client answered %+v, gate-hook %+v", got.answer(), want)
	}
	t.Logf("answered in %v beside %d idle connections", got.took, len(idle))
}
