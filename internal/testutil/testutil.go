// Package testutil holds the helpers the repository's tests share: a test-scoped context,
// polling until a condition holds, a fresh namespace on a test API server, and running a
// command for its output, a buffer a test reads while another writes it, a pinned tool, a tool
// of this repository.
//
// Only _test.go files import it; product code must not.
package testutil

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Context returns a context that expires after timeout and is cancelled when the test ends.
func Context(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// Eventually calls check every 100ms until it returns nil, and fails the test with check's
// last error if that has not happened within timeout.
func Eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitFor polls cond every 20ms and fails the test if it is not true within 10s: the wait for
// in-process work (a queue, a handler's goroutine) that finishes in milliseconds.
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CreateNamespace creates a namespace named prefix plus a random suffix (prefix is its
// GenerateName, e.g. "schema-") and returns the name.
func CreateNamespace(ctx context.Context, t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// Run runs name with args in dir (the test's working directory when dir is empty) and returns
// its combined stdout and stderr.
func Run(t testing.TB, dir, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Warnings records the API server's warnings (the Warning response header): set it as a rest
// config's WarningHandlerWithContext.
type Warnings struct {
	mu   sync.Mutex
	seen []string
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *Warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// Take returns the warnings seen since the last Take. Tests that read warnings must not run in
// parallel with others on the same client.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.seen
	w.seen = nil
	return seen
}

// SyncBuffer is a bytes.Buffer that one side may write (a child process's output, a server's
// log or records) while the test reads it. The zero value is ready.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// InstallTool makes the tool bin (under root's bin/) pkg@version, as `make tools` does: if it is
// missing or another version, it is built with hack/install-tool.sh, which takes eta, said on
// stderr first. It is for a test that runs a pinned tool outside `make`.
func InstallTool(root, bin, pkg, version, eta string) error {
	recorded, _ := os.ReadFile(bin + ".version")
	if info, err := os.Stat(bin); err == nil && info.Mode()&0o111 != 0 && strings.TrimSpace(string(recorded)) == pkg+"@"+version {
		return nil
	}
	name := filepath.Base(bin)
	fmt.Fprintf(os.Stderr, "bin/%s %s is missing; building it with hack/install-tool.sh (%s, once)\n", name, version, eta)
	cmd := exec.Command(filepath.Join(root, "hack", "install-tool.sh"), bin, pkg, version)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("hack/install-tool.sh bin/%s %s %s: %v\n%s", name, pkg, version, err, out)
	}
	return nil
}

// BuildTool makes bin/<name> under root from the Go module hack/<name>, as `make tools` does:
// hack/build-tool.sh builds it if it is missing or older than a file of the module, saying so
// on stderr. It returns the binary's path. It is for a test that runs a tool of this repository
// outside `make`.
func BuildTool(root, name string) (string, error) {
	bin := filepath.Join(root, "bin", name)
	dir := filepath.Join(root, "hack", name)
	cmd := exec.Command(filepath.Join(root, "hack", "build-tool.sh"), bin, dir)
	cmd.Dir = root
	var out bytes.Buffer
	w := io.MultiWriter(&out, os.Stderr)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/build-tool.sh bin/%s hack/%s: %v\n%s", name, name, err, out.String())
	}
	// go test caches a pass until a file the test itself opened changes: stat the module's
	// files and the binary on the test's behalf, so that a change to either runs it again.
	err := filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		_, _ = os.Stat(path)
		return err
	})
	_, _ = os.Stat(bin)
	return bin, err
}
