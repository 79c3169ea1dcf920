package approvals

import (
	"testing"

	"go.uber.org/goleak"
)

// The Watch starts workers: none may outlive its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
