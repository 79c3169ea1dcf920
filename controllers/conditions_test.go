package controllers

import (
	"errors"
	"testing"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/egress"
	"github.com/intutic/gate-operator/internal/gate"
)

// wantConditions is the status and reason of each condition a case expects, Ready first.
type wantConditions map[string]string

func checkConditions(t *testing.T, got []metav1.Condition, want wantConditions, gen int64) {
	t.Helper()
	if got[0].Type != gatev1.ConditionReady {
		t.Errorf("Ready is not first: %v", got)
	}
	for _, c := range got {
		if w, ok := want[c.Type]; !ok || string(c.Status)+"/"+c.Reason != w {
			t.Errorf("%s is %s/%s (%s), want %s", c.Type, c.Status, c.Reason, c.Message, w)
		}
		if c.ObservedGeneration != gen || c.Message == "" {
			t.Errorf("%s: observedGeneration %d (want %d), message %q", c.Type, c.ObservedGeneration, gen, c.Message)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d conditions, want %d", len(got), len(want))
	}
}

func TestPolicyConditions(t *testing.T) {
	p := newPolicy("agents", "coding-agents")
	p.Generation = 4
	published := bootstrap.Result{Bundle: bootstrap.Bundle{Hash: "sha256:1"}, Snapshot: &gate.Snapshot{Generation: 3}}
	refused := errors.New(`admission webhook "x" denied the request`)
	compileErrs := gate.FieldErrors{{Field: "spec.rules[1].when", Message: "undeclared reference to 'inptu'"}}
	cases := []struct {
		name    string
		want    desiredState
		applied policyApplied
		cond    wantConditions
	}{
		{"in force", desiredState{build: published}, policyApplied{},
			wantConditions{"Ready": "True/Ready", "RulesCompiled": "True/Compiled", "BootstrapRendered": "True/Rendered", "EgressEnforced": "True/Enforced"}},
		{"rules do not compile, last good kept", desiredState{build: bootstrap.Result{Bundle: published.Bundle, Snapshot: published.Snapshot, CompileErrs: compileErrs, Kept: true}, egressKept: true}, policyApplied{},
			wantConditions{"Ready": "False/CompileFailed", "RulesCompiled": "False/CompileFailed", "BootstrapRendered": "False/LastGoodKept", "EgressEnforced": "False/LastGoodKept"}},
		{"rules never compiled", desiredState{build: bootstrap.Result{Bundle: published.Bundle, Snapshot: &gate.Snapshot{Invalid: "x"}, CompileErrs: compileErrs}}, policyApplied{},
			wantConditions{"Ready": "False/CompileFailed", "RulesCompiled": "False/CompileFailed", "BootstrapRendered": "False/PolicyInvalid", "EgressEnforced": "False/PolicyInvalid"}},
		{"bundle too large", desiredState{build: bootstrap.Result{Bundle: published.Bundle, Snapshot: published.Snapshot, RenderErr: &bootstrap.TooLargeError{Size: 2 << 20}, Kept: true}, egressKept: true}, policyApplied{},
			wantConditions{"Ready": "False/BundleTooLarge", "RulesCompiled": "True/Compiled", "BootstrapRendered": "False/BundleTooLarge", "EgressEnforced": "False/LastGoodKept"}},
		{"ConfigMap refused", desiredState{build: published}, policyApplied{configMapErr: refused},
			wantConditions{"Ready": "False/ApplyFailed", "RulesCompiled": "True/Compiled", "BootstrapRendered": "False/ApplyFailed", "EgressEnforced": "True/Enforced"}},
		{"NetworkPolicy refused", desiredState{build: published}, policyApplied{networkPolicyErr: refused},
			wantConditions{"Ready": "False/ApplyFailed", "RulesCompiled": "True/Compiled", "BootstrapRendered": "True/Rendered", "EgressEnforced": "False/ApplyFailed"}},
		{"shadowed", desiredState{build: published, shadowing: []string{"allow-all"}}, policyApplied{},
			wantConditions{"Ready": "False/ShadowedByPolicy", "RulesCompiled": "True/Compiled", "BootstrapRendered": "True/Rendered", "EgressEnforced": "False/ShadowedByPolicy"}},
		{"hosts unresolved", desiredState{build: published, resolution: &egress.Resolution{Unresolved: []string{"nowhere.invalid"}}}, policyApplied{},
			wantConditions{"Ready": "False/HostsUnresolved", "RulesCompiled": "True/Compiled", "BootstrapRendered": "True/Rendered", "EgressEnforced": "False/HostsUnresolved"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkConditions(t, policyConditions(p, &tc.want, tc.applied), tc.cond, 4)
		})
	}
}

func TestConfirmerConditions(t *testing.T) {
	sc := newConfirmerObj("agents")
	sc.Generation = 2
	ready := newPolicy("agents", "coding-agents")
	ready.Status.Conditions = []metav1.Condition{{Type: gatev1.ConditionReady, Status: metav1.ConditionTrue, Reason: gatev1.ReasonReady}}
	notReady := newPolicy("agents", "coding-agents")
	notReady.Status.Conditions = []metav1.Condition{{Type: gatev1.ConditionReady, Status: metav1.ConditionFalse, Reason: gatev1.ReasonCompileFailed, Message: "x"}}
	available := &appsv1.Deployment{Status: appsv1.DeploymentStatus{ReadyReplicas: 2, Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}}
	progressing := &appsv1.Deployment{}
	cases := []struct {
		name    string
		o       confirmerObserved
		applied confirmerApplied
		cond    wantConditions
	}{
		{"answering", confirmerObserved{policy: ready, deployment: available}, confirmerApplied{attempted: true},
			wantConditions{"Ready": "True/Ready", "PolicyResolved": "True/PolicyResolved", "Available": "True/Available"}},
		{"no policy", confirmerObserved{}, confirmerApplied{},
			wantConditions{"Ready": "False/PolicyNotFound", "PolicyResolved": "False/PolicyNotFound", "Available": "False/DeploymentPending"}},
		{"policy not ready", confirmerObserved{policy: notReady, deployment: available}, confirmerApplied{attempted: true},
			wantConditions{"Ready": "False/PolicyNotReady", "PolicyResolved": "False/PolicyNotReady", "Available": "True/Available"}},
		{"Secret missing", confirmerObserved{policy: ready, missingSecrets: []string{"anthropic/api-key"}}, confirmerApplied{},
			wantConditions{"Ready": "False/SecretMissing", "PolicyResolved": "True/PolicyResolved", "Available": "False/SecretMissing"}},
		{"Deployment refused", confirmerObserved{policy: ready, deployment: available}, confirmerApplied{attempted: true, err: &childError{child: "Deployment agents-confirmer", err: errors.New("denied")}},
			wantConditions{"Ready": "False/ApplyFailed", "PolicyResolved": "True/PolicyResolved", "Available": "False/ApplyFailed"}},
		{"Deployment not available yet", confirmerObserved{policy: ready, deployment: progressing}, confirmerApplied{attempted: true},
			wantConditions{"Ready": "False/Unavailable", "PolicyResolved": "True/PolicyResolved", "Available": "False/Unavailable"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkConditions(t, confirmerConditions(sc, &tc.o, tc.applied), tc.cond, 2)
		})
	}
}

func builds(t *testing.T) float64 {
	t.Helper()
	var m dto.Metric
	if err := snapshotBuilds.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestPodLabelsDoNotRecompile: reconciles that pods or other NetworkPolicies cause reuse the
// policy's last build; a new generation compiles again.
func TestPodLabelsDoNotRecompile(t *testing.T) {
	r := &HarnessAgentPolicyReconciler{}
	p := newPolicy("agents", "memo")
	p.UID, p.Generation = "uid-memo", 1
	before := builds(t)
	for _, labels := range []map[string]string{nil, {"app": "a"}, {"app": "b", gatev1.LabelPolicy: "memo"}} {
		if _, err := r.compute(p, &observedState{podLabels: []map[string]string{labels}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := builds(t) - before; got != 1 {
		t.Fatalf("three reconciles of one generation built %v times, want 1", got)
	}
	p.Generation = 2
	if _, err := r.compute(p, &observedState{}); err != nil {
		t.Fatal(err)
	}
	if got := builds(t) - before; got != 2 {
		t.Fatalf("a new generation must build again: %v builds", got)
	}
}
