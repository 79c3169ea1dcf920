package controllers

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestAuditPolicy: a policy set to Audit publishes a snapshot in which its Block rule lets the
// call through as a would-block, a rule set to Enforce still blocks, and the status (and so the
// printer columns) show the mode.
func TestAuditPolicy(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	p := newPolicy(testutil.CreateNamespace(ctx, t, k8sClient, "policy-"), "trial")
	p.Spec.Enforcement = gatev1.EnforcementAudit
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := waitCondition(t, p, gatev1.ConditionReady, metav1.ConditionTrue, "")
	if got.Status.Enforcement != gatev1.EnforcementAudit || got.Status.AuditedRules != 2 {
		t.Fatalf("status enforcement %q, %d audited rules; want Audit, 2", got.Status.Enforcement, got.Status.AuditedRules)
	}
	decide := func(p *gatev1.HarnessAgentPolicy) gate.Decision {
		t.Helper()
		cm, _ := children(t, p)
		g := gate.New("ws_123")
		if err := g.Load([]byte(cm.Data[bootstrap.KeySnapshot])); err != nil {
			t.Fatal(err)
		}
		return g.Decide(&gate.Call{Tool: "Bash", Input: map[string]any{"command": "rm -rf /"}, Surface: gate.SurfaceHook})
	}
	if d := decide(got); d.Verdict != gate.Allow || d.Would == nil || d.Would.Verdict != gate.Block || d.Would.Rule != "no-root-rm" {
		t.Fatalf("Audit policy decided %+v, want an Allow recording no-root-rm's Block", d)
	}

	updatePolicy(t, p, func(p *gatev1.HarnessAgentPolicy) { p.Spec.Rules[0].Enforcement = gatev1.EnforcementEnforce })
	testutil.Eventually(t, 10*time.Second, func() error {
		got = getPolicy(t, p)
		if got.Status.ObservedGeneration != got.Generation || got.Status.AuditedRules != 1 {
			return fmt.Errorf("generation %d observed %d, %d audited rules", got.Generation, got.Status.ObservedGeneration, got.Status.AuditedRules)
		}
		return nil
	})
	if d := decide(got); d.Verdict != gate.Block || d.Rule != "no-root-rm" || d.Would != nil {
		t.Fatalf("a rule set to Enforce in an Audit policy decided %+v, want its Block", d)
	}
}

// TestNeverCompiledAuditPolicyBlocks: Audit never weakens a fault. Rules that never compiled
// publish a snapshot that blocks every call, in Enforce whatever the spec says.
func TestNeverCompiledAuditPolicyBlocks(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	p := newPolicy(testutil.CreateNamespace(ctx, t, k8sClient, "policy-"), "broken-trial")
	p.Spec.Enforcement = gatev1.EnforcementAudit
	p.Spec.Rules[0].When = `input.command.matches(`
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := waitCondition(t, p, gatev1.ConditionBootstrapRendered, metav1.ConditionFalse, gatev1.ReasonPolicyInvalid)
	cm, _ := children(t, got)
	g := gate.New("ws_123")
	if err := g.Load([]byte(cm.Data[bootstrap.KeySnapshot])); err != nil {
		t.Fatal(err)
	}
	if d := g.Decide(&gate.Call{Tool: "Read", Input: map[string]any{"file_path": "README.md"}}); d.Verdict != gate.Block || d.Code != gate.CodePolicyInvalid || d.Would != nil {
		t.Fatalf("a never-compiled Audit policy's snapshot decided %+v", d)
	}
	if got.Status.Enforcement != gatev1.EnforcementEnforce {
		t.Fatalf("status enforcement %q, want Enforce: the snapshot in force blocks every call", got.Status.Enforcement)
	}
}
