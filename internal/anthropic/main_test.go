package anthropic

import (
	"testing"

	"go.uber.org/goleak"
)

// Streams start goroutines (the idle timer, the transport's readers): none may outlive its
// test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
