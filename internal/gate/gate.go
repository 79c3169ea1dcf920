package gate

import (
	"sync/atomic"
)

// Gate decides calls against the policy in force. It is safe for concurrent use; Load and
// Swap replace the policy atomically, so readers never lock. Every fault ends in a Block: a
// gate with no policy, a failed load, or a panic during evaluation.
type Gate struct {
	workspace string
	state     atomic.Pointer[gateState]
}

// gateState is a compiled policy, the layers of a layered bundle, or the refusal that stands
// in for them.
type gateState struct {
	policy  *Policy
	layered *LayeredPolicy
	failure *SnapshotError
}

// New returns a gate with no policy: it blocks every call with snapshot_missing until a
// snapshot is loaded. A non-empty workspace makes it refuse snapshots of other workspaces.
func New(workspace string) *Gate {
	g := &Gate{workspace: workspace}
	g.state.Store(&gateState{failure: &SnapshotError{CodeSnapshotMissing, "no policy snapshot has been loaded"}})
	return g
}

// LoadFile loads, verifies and compiles the snapshot at path and puts it in force. When that
// fails, the failure is put in force instead, so calls are refused with its code, and the
// error is returned.
func (g *Gate) LoadFile(path string) error {
	s, err := LoadSnapshotFile(path, g.workspace)
	return g.put(s, err)
}

// Load is LoadFile for snapshot bytes.
func (g *Gate) Load(data []byte) error {
	s, err := LoadSnapshot(data, g.workspace)
	return g.put(s, err)
}

func (g *Gate) put(s *Snapshot, err error) error {
	if err != nil {
		g.Fail(err)
		return g.Ready()
	}
	p, _ := Compile(s)
	g.Swap(p)
	return nil
}

// Swap puts a compiled policy in force.
func (g *Gate) Swap(p *Policy) {
	if p == nil {
		g.state.Store(&gateState{failure: &SnapshotError{CodeSnapshotMissing, "no policy snapshot has been loaded"}})
		return
	}
	g.state.Store(&gateState{policy: p})
}

// SwapLayered puts the layers of a layered bundle in force (LayerSet.Compile).
func (g *Gate) SwapLayered(lp *LayeredPolicy) {
	if lp == nil {
		g.Swap(nil)
		return
	}
	g.state.Store(&gateState{layered: lp})
}

// Fail puts a refusal in force: every call is refused with err's code (snapshot_corrupt when
// it is not a *SnapshotError) until a policy is swapped in.
func (g *Gate) Fail(err error) {
	se, ok := err.(*SnapshotError)
	if !ok {
		se = &SnapshotError{CodeSnapshotCorrupt, err.Error()}
	}
	g.state.Store(&gateState{failure: se})
}

// Ready reports whether a policy (or a layered bundle's layers) is in force, and otherwise
// the failure that stands in for it.
func (g *Gate) Ready() error {
	st := g.state.Load()
	if st.policy == nil && st.layered == nil {
		if st.failure == nil {
			return &SnapshotError{CodeSnapshotMissing, "no policy snapshot has been loaded"}
		}
		return st.failure
	}
	return nil
}

// Decide decides one call against the policy in force, or refuses it with the reason there
// is none.
func (g *Gate) Decide(c *Call) Decision {
	st := g.state.Load()
	if st.layered != nil {
		return st.layered.Decide(c)
	}
	if st.policy == nil {
		failure := st.failure
		if failure == nil {
			failure = &SnapshotError{CodeSnapshotMissing, "no policy snapshot has been loaded"}
		}
		return Refuse(failure.Code, failure.Reason)
	}
	return st.policy.Decide(c)
}
