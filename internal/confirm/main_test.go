package confirm

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts goroutines (watchers, stream timers, queue workers, the reloader): none
// may outlive its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
