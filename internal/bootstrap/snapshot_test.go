package bootstrap

import (
	"testing"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/gate"
)

// TestSnapshotSourceEnforcement: the policy's enforcement and each rule's override reach the
// snapshot, and a policy that states none enforces.
func TestSnapshotSourceEnforcement(t *testing.T) {
	p := samplePolicy(t)
	if len(p.Spec.Rules) < 2 {
		t.Fatal("the sample has fewer than two rules")
	}
	build := func() *gate.Snapshot {
		t.Helper()
		s, err := gate.BuildSnapshot(SnapshotSource(p))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := build(); s.Mode() != gate.Enforce || s.AuditedRules() != 0 {
		t.Fatalf("no enforcement stated: mode %s, %d audited rules", s.Mode(), s.AuditedRules())
	}
	p.Spec.Enforcement = gatev1.EnforcementAudit
	p.Spec.Rules[0].Enforcement = gatev1.EnforcementEnforce
	s := build()
	if s.Mode() != gate.Audit || s.RuleMode(&s.Rules[0]) != gate.Enforce || s.RuleMode(&s.Rules[1]) != gate.Audit || s.AuditedRules() != len(s.Rules)-1 {
		t.Fatalf("policy Audit, rule 0 Enforce: mode %s, rule 0 %s, rule 1 %s", s.Mode(), s.RuleMode(&s.Rules[0]), s.RuleMode(&s.Rules[1]))
	}
	p.Spec.Enforcement = gatev1.EnforcementEnforce
	p.Spec.Rules[0].Enforcement = gatev1.EnforcementAudit
	if s := build(); s.Mode() != gate.Enforce || s.RuleMode(&s.Rules[0]) != gate.Audit || s.AuditedRules() != 1 {
		t.Fatalf("policy Enforce, rule 0 Audit: mode %s, rule 0 %s", s.Mode(), s.RuleMode(&s.Rules[0]))
	}
}
