package gateagent

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// hookBin is gate-hook as the images ship it (built without CEL, gate-hook-cel beside it): the
// sidecar's answers are compared with its, byte for byte.
var hookBin string

// The package starts goroutines (the accept loop, connections, the watcher, the spool reader):
// none may outlive its test.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gateagent-test-")
	if err != nil {
		panic(err)
	}
	hookBin = filepath.Join(dir, "gate-hook")
	for _, b := range []struct{ out, tags string }{{hookBin, "nocel"}, {filepath.Join(dir, "gate-hook-cel"), ""}} {
		build := exec.Command("go", "build", "-tags", b.tags, "-o", b.out, "../../cmd/gate-hook")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			os.Stderr.Write(out)
			panic(err)
		}
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.RemoveAll(dir); os.Exit(code) }))
}
