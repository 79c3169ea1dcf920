//go:build !nocel

package gate

import (
	"errors"

	"cel.dev/cel-go/interpreter"
)

// cancelledForCost reports whether cel-go cancelled an evaluation for its cost or memory.
func cancelledForCost(err error) bool {
	var cancelled interpreter.EvalCancelledError
	return errors.As(err, &cancelled) && (cancelled.Cause == interpreter.CostLimitExceeded || cancelled.Cause == interpreter.MemoryLimitExceeded)
}
