package gateapi

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts goroutines (token reviews shared by concurrent requests, the servers of
// the tests): none may outlive its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
