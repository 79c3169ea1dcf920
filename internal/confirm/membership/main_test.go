package membership

import (
	"testing"

	"go.uber.org/goleak"
)

// Run starts a goroutine that applies the reports: none may outlive its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
