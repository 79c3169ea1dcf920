package bootstrap

import (
	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/gate"
)

// SnapshotSource is what a policy's rules snapshot is built from: its metadata and its rules
// in the gate's terms. The controller, the tests and the conformance suite all build
// snapshots through it, so they agree on the mapping.
func SnapshotSource(p *gatev1.HarnessAgentPolicy) (gate.PolicyMeta, []gate.Rule) {
	meta := gate.PolicyMeta{
		Policy:        p.Namespace + "/" + p.Name,
		Generation:    p.Generation,
		WorkspaceID:   p.Spec.WorkspaceID,
		DefaultAction: gate.Verdict(p.Spec.DefaultAction),
		FailurePolicy: gate.FailurePolicy(p.Spec.FailurePolicy),
		Enforcement:   gate.Enforcement(p.Spec.Enforcement),
	}
	return meta, gateRules(p.Spec.Rules)
}
