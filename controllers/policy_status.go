package controllers

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// Condition reasons of HarnessAgentPolicy.
const (
	ReasonCompiled         = "Compiled"
	ReasonCompileFailed    = "CompileFailed"
	ReasonRendered         = "Rendered"
	ReasonLastGoodKept     = "LastGoodKept"
	ReasonPolicyInvalid    = "PolicyInvalid"
	ReasonEnforced         = "Enforced"
	ReasonHostsUnresolved  = "HostsUnresolved"
	ReasonShadowedByPolicy = "ShadowedByPolicy"
	ReasonReady            = "Ready"
)

// policyConditions derives the conditions of a reconcile: each phase owns one, and Ready is
// True only when all are.
func policyConditions(p *gatev1.HarnessAgentPolicy, o *observedState, want *desiredState) []metav1.Condition {
	gen := p.Generation
	cond := func(t string, ok bool, reason, msg string) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen}
	}
	cmName := configMapName(p)

	var rules, rendered, egress metav1.Condition
	if len(want.compileErrs) == 0 {
		rules = cond(gatev1.ConditionRulesCompiled, true, ReasonCompiled, fmt.Sprintf("%d rules compiled", len(p.Spec.Rules)))
		rendered = cond(gatev1.ConditionBootstrapRendered, true, ReasonRendered, fmt.Sprintf("ConfigMap %s holds bootstrap %s", cmName, want.bundle.Hash))
	} else {
		var msgs []string
		for _, e := range want.compileErrs {
			msgs = append(msgs, e.Error())
		}
		rules = cond(gatev1.ConditionRulesCompiled, false, ReasonCompileFailed, strings.Join(msgs, "; ")+"; fix the rules, the gate keeps deciding with the snapshot in force")
		if want.bundle == nil {
			rendered = cond(gatev1.ConditionBootstrapRendered, false, ReasonLastGoodKept,
				fmt.Sprintf("ConfigMap %s keeps the last snapshot that compiled (generation %d) until the rules compile", cmName, want.snapshot.Generation))
		} else {
			rendered = cond(gatev1.ConditionBootstrapRendered, false, ReasonPolicyInvalid,
				fmt.Sprintf("the rules have never compiled: ConfigMap %s carries a snapshot that blocks every call", cmName))
		}
	}
	npName := networkPolicyName(p)
	switch {
	case len(want.shadowing) > 0:
		egress = cond(gatev1.ConditionEgressEnforced, false, ReasonShadowedByPolicy,
			fmt.Sprintf("NetworkPolicy %s also selects governed pods and allows egress; NetworkPolicy allows add up, so it reopens what %s denies: narrow its podSelector or remove its egress rules", strings.Join(want.shadowing, ", "), npName))
	case want.resolution != nil && len(want.resolution.Unresolved) > 0:
		egress = cond(gatev1.ConditionEgressEnforced, false, ReasonHostsUnresolved,
			fmt.Sprintf("%s resolved to no address and cannot be reached; check the names, or that the manager can reach DNS", strings.Join(want.resolution.Unresolved, ", ")))
	default:
		msg := fmt.Sprintf("NetworkPolicy %s denies all egress", npName)
		if want.egress.Mode == gatev1.EgressModeAllowList {
			msg = fmt.Sprintf("NetworkPolicy %s allows DNS and %d addresses and %d CIDRs", npName, want.egress.Addresses, len(p.Spec.Egress.AllowedCIDRs))
		}
		egress = cond(gatev1.ConditionEgressEnforced, true, ReasonEnforced, msg)
	}
	ready := cond(gatev1.ConditionReady, true, ReasonReady, "the policy is in force")
	for _, c := range []metav1.Condition{rules, rendered, egress} {
		if c.Status != metav1.ConditionTrue {
			ready = cond(gatev1.ConditionReady, false, c.Reason, c.Type+": "+c.Message)
			break
		}
	}
	return []metav1.Condition{ready, rules, rendered, egress}
}

// writeStatus writes the status once, and only when it changed. Events mark the transitions
// an operator of the cluster must see.
func (r *HarnessAgentPolicyReconciler) writeStatus(ctx context.Context, p *gatev1.HarnessAgentPolicy, o *observedState, want *desiredState) error {
	next := p.Status.DeepCopy()
	next.ObservedGeneration = p.Generation
	for _, c := range policyConditions(p, o, want) {
		if c.Reason == ReasonCompileFailed && !conditionIs(p.Status.Conditions, c.Type, c.Status, c.Message) {
			r.Recorder.Eventf(p, nil, "Warning", ReasonCompileFailed, "Compile", "%s", c.Message)
		}
		if c.Reason == ReasonShadowedByPolicy && !conditionIs(p.Status.Conditions, c.Type, c.Status, c.Message) {
			r.Recorder.Eventf(p, nil, "Warning", ReasonShadowedByPolicy, "EnforceEgress", "%s", c.Message)
		}
		meta.SetStatusCondition(&next.Conditions, c)
	}
	next.SnapshotDigest = want.snapshot.Digest
	next.RuleCount = int32(len(want.snapshot.Rules))
	next.BootstrapConfigMap = configMapName(p)
	if want.bundle != nil {
		next.BootstrapHash = want.bundle.Hash
	} else if o.configMap != nil {
		next.BootstrapHash = o.configMap.Annotations[gatev1.AnnotationBootstrapHash]
	}
	next.NetworkPolicy = networkPolicyName(p)
	eg := &gatev1.EgressStatus{Mode: want.egress.Mode, Addresses: int32(want.egress.Addresses)}
	if res := want.resolution; res != nil {
		eg.ResolvedHosts = int32(len(res.Resolved))
		eg.UnresolvedHosts = res.Unresolved
		eg.NextResolveTime = &metav1.Time{Time: res.Next.UTC().Truncate(1e9)}
	}
	next.Egress = eg
	if equality.Semantic.DeepEqual(&p.Status, next) {
		return nil
	}
	patch := client.MergeFrom(p.DeepCopy())
	p.Status = *next
	return r.Client.Status().Patch(ctx, p, patch)
}

func conditionIs(conds []metav1.Condition, t string, s metav1.ConditionStatus, msg string) bool {
	c := meta.FindStatusCondition(conds, t)
	return c != nil && c.Status == s && c.Message == msg
}
