package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
	"github.com/intutic/gate-operator/internal/promscrape"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestReplicasShareSessions runs two confirmer processes with --members-lease against a real
// API server: each session is streamed by exactly one of them, both stream some; when one
// stops (SIGTERM, as in a rollout) the other streams every session, and calls paused after
// that are each confirmed once.
func TestReplicasShareSessions(t *testing.T) {
	cfg, kubeconfig := startAPIServer(t, false)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	const key = "sk-ant-replicas-test"
	fake := anthropictest.NewTLS(key)
	t.Cleanup(fake.Close)                   // after the replicas are killed: Close waits for their streams to end
	fake.AcceptDuplicateConfirmations(true) // a second confirmation would show, not be refused
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = fmt.Sprintf("sesn_r%02d", i)
		fake.AddSession(ids[i], "agent_r")
	}
	snap, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/p", Generation: 1}, gatetest.RealisticRules(10))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := snap.Encode()
	for name, content := range map[string][]byte{gate.SnapshotFileName: data, "api-key": []byte(key)} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := fake.WriteCA(filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	start := func(name string) *replicaProcess {
		r := &replicaProcess{addr: freePort(t), metricsAddr: freePort(t), logs: &testutil.SyncBuffer{}, exited: make(chan error, 1)}
		r.cmd = exec.Command(bin, "--listen", r.addr, "--metrics-listen", r.metricsAddr, "--insecure-no-auth", "--snapshot", filepath.Join(dir, gate.SnapshotFileName),
			"--anthropic-base-url", fake.URL, "--anthropic-api-key-file", filepath.Join(dir, "api-key"), "--anthropic-ca-file", filepath.Join(dir, "ca.pem"),
			"--agent-ids", "agent_r", "--poll-interval", "1s", "--kubeconfig", filepath.Join(dir, "kubeconfig"),
			"--members-lease", "agents-confirmer", "--leader-election-namespace", "agents", "--leader-election-identity", name)
		r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { r.exited <- r.cmd.Wait() }()
		t.Cleanup(func() {
			if r.cmd.ProcessState == nil {
				_ = r.cmd.Process.Kill() // the test failed before stopping it
			}
		})
		return r
	}
	a, b := start("confirmer-a"), start("confirmer-b")

	eachStreamedOnce := func() error {
		for _, id := range ids {
			if n := fake.Streams(id); n != 1 {
				return fmt.Errorf("%s has %d streams open", id, n)
			}
		}
		return nil
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		na, nb := a.metric("confirmer_sessions_streamed"), b.metric("confirmer_sessions_streamed")
		if na == 0 || nb == 0 || na+nb != len(ids) {
			return fmt.Errorf("a streams %d and b %d of %d sessions; logs:\n%s\n%s", na, nb, len(ids), a.logs, b.logs)
		}
		return eachStreamedOnce()
	})

	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-a.exited; err != nil {
		t.Fatalf("a did not leave cleanly: %v\n%s", err, a.logs)
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		if n := b.metric("confirmer_sessions_streamed"); n != len(ids) {
			return fmt.Errorf("b streams %d of %d sessions", n, len(ids))
		}
		return eachStreamedOnce()
	})
	for _, id := range ids {
		fake.AddCalls(id, anthropictest.ToolUse{Name: "Read", Input: map[string]any{"file_path": "README.md"}, Permission: "ask"})
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, id := range ids {
			if p := fake.Pending(id); len(p) > 0 {
				return fmt.Errorf("%s still waits on %v", id, p)
			}
		}
		return nil
	})
	for _, id := range ids {
		if n := len(fake.Confirmations(id)); n != 1 {
			t.Errorf("%s: %d confirmations for one call", id, n)
		}
	}
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-b.exited; err != nil {
		t.Fatalf("b did not stop cleanly: %v\n%s", err, b.logs)
	}
}

type replicaProcess struct {
	addr        string
	metricsAddr string // --metrics-listen
	cmd         *exec.Cmd
	logs        *testutil.SyncBuffer
	exited      chan error
}

// metric reads one unlabelled sample from the replica's /metrics; 0 when it cannot.
func (r *replicaProcess) metric(name string) int {
	m, _ := promscrape.Scrape("http://" + r.metricsAddr + "/metrics")
	return int(m[name])
}

// startAPIServer starts an API server (with the CRDs when crds is set) for the test's
// duration and returns its admin config and a kubeconfig for the confirmer processes.
func startAPIServer(t *testing.T, crds bool) (*rest.Config, []byte) {
	t.Helper()
	return apiservertest.StartAdmin(t, crds, "confirmer")
}
