package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateagent/gateagenttest"
)

// freeAddr is a loopback address no one listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestGateAgent runs the binary as the pod does: it replaces a stale socket, makes the new one
// connectable by every user, becomes ready, answers a call, serves its metrics, writes the
// call's record on stdout (not its input), and on SIGTERM stops and exits 0.
func TestGateAgent(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gate-agent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/a", Generation: 1}, []gate.Rule{{Name: "no-stop", Tools: []string{"task_stop"}, Action: gate.Block, Reason: "no"}})
	if err != nil {
		t.Fatal(err)
	}
	vol := gateagenttest.NewVolume(t, gateagenttest.SnapshotFiles(t, s, nil, "pod-0"))
	socket := gateagenttest.SocketPath(t)
	stale, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	health, metrics := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "--bundle-dir", vol.Dir, "--socket", socket, "--fallback-spool", filepath.Join(t.TempDir(), "spool"),
		"--health-bind-address", health, "--metrics-bind-address", metrics)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	waitFor(t, "/readyz", func() bool {
		resp, err := http.Get("http://" + health + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if fi, err := os.Stat(socket); err != nil || fi.Mode().Perm() != 0o666 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket %v, %v; want a socket with mode 0666", fi, err)
	}
	input := gateagenttest.Payload("TaskStop", map[string]any{"task_id": "sk-ant-SECRET"})
	resp, err := gateagenttest.Ask(socket, agentproto.Request{Nonce: gateagenttest.Nonce(1), Runtime: "claude-code", Version: vol.Version(), Input: input})
	if err != nil || resp.Exit != 2 {
		t.Fatalf("answer %+v, %v", resp, err)
	}
	m, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(m.Body)
	m.Body.Close()
	if !strings.Contains(string(body), `gate_agent_decisions_total{code="",layer="",mode="enforce",rule="no-stop",verdict="Block"} 1`) {
		t.Errorf("metrics lack the decision:\n%s", body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after SIGTERM")
	}
	if !strings.Contains(stdout.String(), `"rule":"no-stop"`) || strings.Contains(stdout.String()+stderr.String(), "SECRET") {
		t.Errorf("stdout %q, stderr %q: want the record, and the input nowhere", stdout.String(), stderr.String())
	}
	if _, err := os.Stat(socket); !os.IsNotExist(err) {
		t.Errorf("the socket is left behind: %v", err)
	}
}

// TestListenKeepsOtherFiles: a file at the socket's path that is not a socket is an error,
// never removed.
func TestListenKeepsOtherFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gate.sock")
	if err := os.WriteFile(path, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ln, err := listen(path); err == nil {
		ln.Close()
		t.Fatal("listened over a regular file")
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "data" {
		t.Fatalf("the file was changed: %q %v", data, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
