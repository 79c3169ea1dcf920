//go:build nocel

package gate

// Built with the nocel tag (gate-hook), the package links no CEL: a rule's expression is never
// compiled, so every rule with a when that its prefilter does not rule out needs CEL, and the
// decision is left to a build that has it (see Policy.DecideWithoutCEL).

// BuiltWithCEL says whether this build of the package evaluates CEL: false with the nocel build
// tag, which gate-hook is built with (see Policy.DecideWithoutCEL).
const BuiltWithCEL = false

// lazyProgram stands for a rule's expression, which this build cannot compile.
type lazyProgram struct{ rule Rule }

// usePrecompiled ignores the checked rules file: this build plans no expression.
func (l *lazyProgram) usePrecompiled(*precompiled, int) {}

// derive derives nothing: a rule the snapshot carries no prefilter of needs CEL.
func (l *lazyProgram) derive() (quick, error) { return nil, nil }

// eval cannot evaluate the expression.
func (l *lazyProgram) eval(*activation) (bool, error) { return false, errNeedsCEL }
