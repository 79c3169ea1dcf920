package confirm

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// The package starts goroutines (watchers, stream timers, queue workers, the reloader): none
// may outlive its test.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard()) // the ToolApproval cache logs through controller-runtime
	goleak.VerifyTestMain(m)
}
