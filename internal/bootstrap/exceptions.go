package bootstrap

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/toolname"
)

// ExceptionTarget is the policy a GateException names, as the judge needs it: exactly one of
// Cluster and Namespace is set when it exists, neither when it does not.
type ExceptionTarget struct {
	Cluster   *gatev1.ClusterHarnessAgentPolicy
	Namespace *gatev1.HarnessAgentPolicy
	// NamespaceLabels are the labels of the exception's namespace, for a cluster policy's
	// exceptions.namespaceSelector.
	NamespaceLabels map[string]string
}

// JudgeException is the one judgement of whether a GateException may be honoured, which the
// admission webhook applies at the request and the controllers on every reconcile (a policy
// can change after its exceptions were admitted): Active, Expired, or Refused with why. The
// duration runs from requestedAt: the request that last wrote the spec (the webhook's
// annotation), or the object's creation when it was written without the webhook.
func JudgeException(gex *gatev1.GateException, target ExceptionTarget, now time.Time) (gatev1.ExceptionPhase, string) {
	ref := gex.Spec.PolicyRef
	var rules []gatev1.Rule
	var maxDuration time.Duration
	switch {
	case ref.Kind == gatev1.ExceptionOfClusterPolicy && target.Cluster != nil:
		c := target.Cluster
		if c.Spec.Exceptions == nil {
			return gatev1.ExceptionRefused, fmt.Sprintf("ClusterHarnessAgentPolicy %s allows no exceptions (it has no spec.exceptions)", ref.Name)
		}
		sel, err := metav1.LabelSelectorAsSelector(&c.Spec.Exceptions.NamespaceSelector)
		if err != nil || !sel.Matches(labels.Set(target.NamespaceLabels)) {
			return gatev1.ExceptionRefused, fmt.Sprintf("ClusterHarnessAgentPolicy %s does not allow exceptions in namespace %s (spec.exceptions.namespaceSelector)", ref.Name, gex.Namespace)
		}
		rules, maxDuration = c.Spec.Rules, c.Spec.Exceptions.MaxDuration.Duration
	case ref.Kind == gatev1.ExceptionOfNamespacePolicy && target.Namespace != nil:
		p := target.Namespace
		if p.Spec.Exceptions == nil {
			return gatev1.ExceptionRefused, fmt.Sprintf("HarnessAgentPolicy %s allows no exceptions (it has no spec.exceptions)", ref.Name)
		}
		rules, maxDuration = p.Spec.Rules, p.Spec.Exceptions.MaxDuration.Duration
	default:
		return gatev1.ExceptionRefused, fmt.Sprintf("%s %s does not exist", ref.Kind, ref.Name)
	}
	for _, name := range gex.Spec.Rules {
		if !slices.ContainsFunc(rules, func(r gatev1.Rule) bool { return r.Name == string(name) }) {
			return gatev1.ExceptionRefused, fmt.Sprintf("spec.rules: %s %s has no rule %s", ref.Kind, ref.Name, name)
		}
	}
	for i, t := range gex.Spec.Tools {
		if _, err := toolname.Compile(t); err != nil {
			return gatev1.ExceptionRefused, fmt.Sprintf("spec.tools[%d]: %v", i, err)
		}
	}
	if _, err := metav1.LabelSelectorAsSelector(&gex.Spec.PodSelector); err != nil {
		return gatev1.ExceptionRefused, fmt.Sprintf("spec.podSelector: %v", err)
	}
	expires := gex.Spec.ExpiresAt.Time
	if runs := expires.Sub(RequestedAt(gex)); runs > maxDuration {
		return gatev1.ExceptionRefused, fmt.Sprintf("spec.expiresAt: the exception would run %s from its request, more than the %s %s %s allows (spec.exceptions.maxDuration)",
			runs.Round(time.Second), maxDuration, ref.Kind, ref.Name)
	}
	if !now.Before(expires) {
		return gatev1.ExceptionExpired, fmt.Sprintf("expired at %s; the gate no longer honours it", expires.UTC().Format(time.RFC3339))
	}
	return gatev1.ExceptionActive, fmt.Sprintf("lifts %s of %s %s until %s", strings.Join(ruleNames(gex.Spec.Rules), ", "), ref.Kind, ref.Name, expires.UTC().Format(time.RFC3339))
}

// RequestedAt is when the exception's spec was last written: the webhook's annotation, else
// the object's creation.
func RequestedAt(gex *gatev1.GateException) time.Time {
	if at, err := time.Parse(time.RFC3339, gex.Annotations[gatev1.AnnotationRequestedAt]); err == nil {
		return at
	}
	return gex.CreationTimestamp.Time
}

func ruleNames(rules []gatev1.RuleName) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = string(r)
	}
	return out
}

// ExceptionOf is an active exception as the layers index carries it, for the layer of the
// policy it names: the gate honours it until its expiresAt by its own clock.
func ExceptionOf(gex *gatev1.GateException) (gate.Exception, error) {
	reqs, err := Requirements(&gex.Spec.PodSelector)
	if err != nil {
		return gate.Exception{}, fmt.Errorf("spec.podSelector: %w", err)
	}
	return gate.Exception{
		Name: gex.Name, Rules: ruleNames(gex.Spec.Rules), Tools: slices.Clone(gex.Spec.Tools), PodSelector: reqs,
		ExpiresAt: gex.Spec.ExpiresAt.UTC().Format(time.RFC3339),
	}, nil
}

// ActiveExceptions are the exceptions among items (of one namespace) that name the policy of
// this kind and name and that JudgeException finds Active at now, as the layers index carries
// them, and when the first of them expires (zero for none). The controller and gatectl pick
// a bundle's exceptions with it.
func ActiveExceptions(items []gatev1.GateException, kind gatev1.ExceptionPolicyKind, name string, target ExceptionTarget, now time.Time) ([]gate.Exception, time.Time, error) {
	var out []gate.Exception
	var next time.Time
	for i := range items {
		gex := &items[i]
		if ref := gex.Spec.PolicyRef; ref.Kind != kind || ref.Name != name || !gex.DeletionTimestamp.IsZero() {
			continue
		}
		if phase, _ := JudgeException(gex, target, now); phase != gatev1.ExceptionActive {
			continue
		}
		e, err := ExceptionOf(gex)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("GateException %s: %w", gex.Name, err)
		}
		if at := gex.Spec.ExpiresAt.Time; next.IsZero() || at.Before(next) {
			next = at
		}
		out = append(out, e)
	}
	return out, next, nil
}
