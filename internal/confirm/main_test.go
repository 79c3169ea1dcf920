package confirm

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts goroutines (stream readers, watchers, queue workers): none may outlive
// its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
