package main

// These tests build the real confirmer and run it against the in-process Sessions API fake,
// configured the way the SessionConfirmer Deployment configures it (files, not env).

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/decisionlog/decisionlogtest"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/promscrape"
	"github.com/intutic/gate-operator/internal/testutil"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "confirmer-test-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "confirmer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestConfirmerAnswersSessions runs the confirmer against the fake over HTTP/2 and TLS, as
// the real API speaks, trusting the fake's certificate through --anthropic-ca-file.
func TestConfirmerAnswersSessions(t *testing.T) {
	const key = "sk-ant-confirmer-test"
	fake := anthropictest.NewTLS(key)
	defer fake.Close()
	ids := fake.AddSession("sesn_cli", "agent_cli",
		anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "rm -rf /"}, Permission: "ask"},
		anthropictest.ToolUse{Name: "read", Input: map[string]any{"file_path": "README.md"}, Permission: "ask"},
	)

	dir := t.TempDir()
	snap, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/p", Generation: 1}, []gate.Rule{
		{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.matches("rm\\s+-rf\\s+/")`, Action: gate.Block, Reason: "destructive command on the root filesystem"},
	})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := snap.Encode()
	if err := os.WriteFile(filepath.Join(dir, gate.SnapshotFileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "harness-settings.json"), []byte(`{"permissionMode":"allow-edits"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "api-key"), []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := fake.WriteCA(filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatal(err)
	}

	addr, metricsAddr := freePort(t), freePort(t)
	logs, records := &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	cmd := exec.Command(bin, "--listen", addr, "--metrics-listen", metricsAddr, "--insecure-no-auth",
		"--snapshot", filepath.Join(dir, gate.SnapshotFileName),
		"--anthropic-base-url", fake.URL, "--anthropic-api-key-file", filepath.Join(dir, "api-key"),
		"--anthropic-ca-file", filepath.Join(dir, "ca.pem"), "--agent-ids", "agent_cli", "--poll-interval", "1s")
	cmd.Stdout, cmd.Stderr = records, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill() // best effort: the test failed before the shutdown below
		}
	}()

	testutil.Eventually(t, 15*time.Second, func() error {
		if len(fake.Confirmations("sesn_cli")) < 2 {
			return fmt.Errorf("no confirmations; logs:\n%s", logs.String())
		}
		return nil
	})
	got := map[string]string{}
	for _, c := range fake.Confirmations("sesn_cli") {
		got[c["tool_use_id"].(string)] = fmt.Sprint(c["result"], " ", c["deny_message"])
	}
	if got[ids[0]] != "deny [Intutic Governance] BLOCKED: destructive command on the root filesystem" || got[ids[1]] != "allow <nil>" {
		t.Fatalf("confirmations %v", got)
	}
	for _, r := range fake.Requests() {
		if r.Proto != "HTTP/2.0" {
			t.Fatalf("%s %s came over %s, not HTTP/2", r.Method, r.Path, r.Proto)
		}
	}

	// The session watchers start before the server listens: confirmations do not prove the
	// port is bound yet.
	var resp *http.Response
	testutil.Eventually(t, 15*time.Second, func() (err error) {
		resp, err = http.Get("http://" + addr + "/readyz")
		return err
	})
	var ready map[string]any
	err = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	if resp.StatusCode != 200 || ready["ready"] != true || len(ready) != 1 {
		t.Fatalf("readyz %d %v, want ready alone", resp.StatusCode, ready)
	}
	// /metrics is on its own listener, which names the snapshot in force; the API port has none.
	if resp, err := http.Get("http://" + addr + "/metrics"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/metrics on the API port: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if m, err := promscrape.Scrape("http://" + metricsAddr + "/metrics"); err != nil || m[`confirmer_snapshot_in_force{digest="`+snap.Digest+`"}`] != 1 {
		t.Fatalf("metrics listener: %v, no confirmer_snapshot_in_force for %s", err, snap.Digest)
	}
	resp, err = http.Post("http://"+addr+"/v1/guard", "application/json", strings.NewReader(`{"tool":"bash","input":{"command":"ls"}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"verdict":"Allow"`) {
		t.Fatalf("guard: %s", body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("shutdown: %v\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the confirmer did not shut down")
	}

	// stdout is the decision trail: one record per decision, each admitted by the schema,
	// without the input or the key; the logs on stderr hold neither.
	for _, out := range []string{logs.String(), records.String()} {
		if strings.Contains(out, "rm -rf") || strings.Contains(out, key) {
			t.Fatalf("the output carries a tool input or the API key:\n%s", out)
		}
	}
	var decisions []decisionlog.Record
	for line := range strings.SplitSeq(strings.TrimSuffix(records.String(), "\n"), "\n") {
		decisions = append(decisions, decisionlogtest.Validate(t, []byte(line)))
	}
	if len(decisions) < 3 || !slices.ContainsFunc(decisions, func(r decisionlog.Record) bool { return r.Surface == gate.SurfaceManagedAgents && r.Verdict == "Block" }) ||
		!slices.ContainsFunc(decisions, func(r decisionlog.Record) bool { return r.Surface == gate.SurfaceAPI && r.Verdict == "Allow" }) {
		t.Fatalf("records on stdout:\n%s\nlogs:\n%s", records.String(), logs.String())
	}
}

func TestInsecureNoAuthNeedsLoopback(t *testing.T) {
	out, err := testutil.Run(t, "", bin, "--listen", ":0", "--insecure-no-auth", "--snapshot", "/nonexistent")
	if err == nil || !strings.Contains(out, "--insecure-no-auth is refused") {
		t.Fatalf("want a refusal, got %v: %s", err, out)
	}
}
