//go:build nocel

package gate

// precompiled stands for the checked rules file beside a snapshot, which this build, planning
// no expression, never reads.
type precompiled struct{}

func newPrecompiled(string, *Snapshot) *precompiled { return nil }
