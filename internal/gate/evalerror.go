package gate

import (
	"errors"
	"strings"
)

// Kinds of rule error a refusal's reason names ("rule <name> could not be evaluated: <kind>").
// A reason never carries the error's own text: cel-go's messages quote values of the input
// ("no such key: <key>", "invalid RFC 3339 timestamp <value>"), and reasons are logged.
const (
	// ErrorKindNoSuchKey: a map key or field the input does not have.
	ErrorKindNoSuchKey = "no_such_key"
	// ErrorKindTypeMismatch: no overload for the operand types, or a when that is not a bool.
	ErrorKindTypeMismatch = "type_mismatch"
	// ErrorKindInvalidArgument: a value of the right type that the function rejects: a string
	// that is no timestamp, duration or number, a bad regex, a division by zero, an index out of
	// range.
	ErrorKindInvalidArgument = "invalid_argument"
	// ErrorKindOverflow: an integer, duration or timestamp out of range.
	ErrorKindOverflow = "overflow"
	// ErrorKindCostLimit: evaluation exceeded the cost limit (refused with input_too_costly).
	ErrorKindCostLimit = "cost_limit"
	// ErrorKindCompile: the rule's expression does not compile.
	ErrorKindCompile = "compile_error"
	// ErrorKindOther: anything else.
	ErrorKindOther = "other"
)

// compileError marks a rule that could not be compiled, as opposed to one that failed on a call.
type compileError struct{ err error }

func (e compileError) Error() string { return e.err.Error() }
func (e compileError) Unwrap() error { return e.err }

// errorKind classifies an evaluation error by what cel-go exposes: the cancellation cause of an
// EvalCancelledError, otherwise the fixed wording its messages start with.
func errorKind(err error) string {
	if cancelledForCost(err) {
		return ErrorKindCostLimit
	}
	var ce compileError
	if errors.As(err, &ce) {
		return ErrorKindCompile
	}
	if errors.Is(err, errNotBool) {
		return ErrorKindTypeMismatch
	}
	msg := strings.ToLower(err.Error())
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(msg, w) {
				return true
			}
		}
		return false
	}
	switch {
	case has("cost limit exceeded", "memory limit exceeded"):
		return ErrorKindCostLimit
	case has("no such key", "no such attribute", "no such field"):
		return ErrorKindNoSuchKey
	case has("overflow"):
		return ErrorKindOverflow
	case has("type conversion", "invalid", "parsing", "parse", "out of range", "by zero", "cannot be ordered", "regex", "format"):
		return ErrorKindInvalidArgument
	case has("no such overload", "no matching overload", "unsupported", "unexpected type", "not a bool"):
		return ErrorKindTypeMismatch
	default:
		return ErrorKindOther
	}
}
