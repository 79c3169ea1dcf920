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
		RecordInput:   inputRecording(p.Spec.DecisionRecords),
	}
	return meta, gateRules(p.Spec.Rules)
}

// inputRecording is a policy's spec.decisionRecords.input in the gate's terms; nil when the
// policy does not opt in.
func inputRecording(dr *gatev1.DecisionRecordsSpec) *gate.InputRecording {
	if dr == nil || dr.Input == nil {
		return nil
	}
	pointers := func(ps []gatev1.JSONPointer) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = string(p)
		}
		return out
	}
	return &gate.InputRecording{Erase: pointers(dr.Input.Erase), Hash: pointers(dr.Input.Hash)}
}
