package gate

import "time"

// CompiledRules is how many rules a policy compiled, for tests of CompileFor.
func CompiledRules(p *Policy) int { return len(p.rules) }

// SetClock sets the clock a layered policy judges exceptions' expiry by, for tests across an
// exception's expiresAt.
func SetClock(lp *LayeredPolicy, now func() time.Time) { lp.now = now }
