//go:build nocel

package gate

// cancelledForCost: this build evaluates no CEL, so nothing is cancelled.
func cancelledForCost(error) bool { return false }
