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
	"github.com/intutic/gate-operator/internal/bootstrap"
)

// Condition reasons of HarnessAgentPolicy.
const (
	ReasonCompiled          = "Compiled"
	ReasonCompileFailed     = "CompileFailed"
	ReasonRendered          = "Rendered"
	ReasonLastGoodKept      = "LastGoodKept"
	ReasonBundleTooLarge    = "BundleTooLarge"
	ReasonApplyFailed       = "ApplyFailed"
	ReasonPolicyInvalid     = "PolicyInvalid"
	ReasonEnforced          = "Enforced"
	ReasonHostsUnresolved   = "HostsUnresolved"
	ReasonAddressesRejected = "AddressesRejected"
	ReasonShadowedByPolicy  = "ShadowedByPolicy"
	ReasonReady             = "Ready"
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
	} else {
		var msgs []string
		for _, e := range want.compileErrs {
			msgs = append(msgs, e.Error())
		}
		rules = cond(gatev1.ConditionRulesCompiled, false, ReasonCompileFailed, strings.Join(msgs, "; ")+"; fix the rules, the gate keeps deciding with the snapshot in force")
	}
	switch {
	case want.configMapErr != nil:
		rendered = cond(gatev1.ConditionBootstrapRendered, false, ReasonApplyFailed,
			fmt.Sprintf("applying ConfigMap %s failed, so sandboxes keep the bundle in force before this generation: %v", cmName, want.configMapErr))
	case want.renderErr != nil && want.kept:
		rendered = cond(gatev1.ConditionBootstrapRendered, false, ReasonBundleTooLarge,
			fmt.Sprintf("%v: ConfigMap %s keeps the last snapshot published (generation %d); shorten the rules or split the policy", want.renderErr, cmName, want.snapshot.Generation))
	case want.renderErr != nil:
		rendered = cond(gatev1.ConditionBootstrapRendered, false, ReasonBundleTooLarge,
			fmt.Sprintf("%v: ConfigMap %s carries a snapshot that blocks every call; shorten the rules or split the policy", want.renderErr, cmName))
	case want.kept:
		rendered = cond(gatev1.ConditionBootstrapRendered, false, ReasonLastGoodKept,
			fmt.Sprintf("ConfigMap %s keeps the last snapshot that compiled (generation %d) until the rules compile", cmName, want.snapshot.Generation))
	case len(want.compileErrs) > 0:
		rendered = cond(gatev1.ConditionBootstrapRendered, false, ReasonPolicyInvalid,
			fmt.Sprintf("the rules do not compile and there is no snapshot this controller published to keep: ConfigMap %s carries a snapshot that blocks every call", cmName))
	default:
		rendered = cond(gatev1.ConditionBootstrapRendered, true, ReasonRendered, fmt.Sprintf("ConfigMap %s holds bootstrap %s", cmName, want.bundle.Hash))
	}
	npName := networkPolicyName(p)
	switch {
	case want.networkPolicyErr != nil:
		egress = cond(gatev1.ConditionEgressEnforced, false, ReasonApplyFailed,
			fmt.Sprintf("applying NetworkPolicy %s failed, so the egress in force before this generation stays: %v", npName, want.networkPolicyErr))
	case len(want.shadowing) > 0:
		egress = cond(gatev1.ConditionEgressEnforced, false, ReasonShadowedByPolicy,
			fmt.Sprintf("NetworkPolicy %s also selects governed pods and allows egress; NetworkPolicy allows add up, so it reopens what %s denies: narrow its podSelector or remove its egress rules", strings.Join(want.shadowing, ", "), npName))
	case want.egressKept:
		egress = cond(gatev1.ConditionEgressEnforced, false, ReasonLastGoodKept,
			fmt.Sprintf("%s, so NetworkPolicy %s keeps the egress in force (%s); spec.egress is applied once the rules can be published", heldBackWhy(want), npName, modePhrase(want.egress.Mode)))
	case want.heldBack():
		egress = cond(gatev1.ConditionEgressEnforced, false, ReasonPolicyInvalid,
			fmt.Sprintf("%s and there is no egress in force to keep: NetworkPolicy %s denies all egress until the rules can be published", heldBackWhy(want), npName))
	case want.resolution != nil && len(want.resolution.Unresolved) > 0 || len(want.egress.Rejected) > 0:
		var msgs []string
		reason := ReasonAddressesRejected
		if want.resolution != nil && len(want.resolution.Unresolved) > 0 {
			reason = ReasonHostsUnresolved
			msgs = append(msgs, fmt.Sprintf("%s resolved to no address and cannot be reached; check the names, or that the manager can reach DNS", strings.Join(want.resolution.Unresolved, ", ")))
		}
		if len(want.egress.Rejected) > 0 {
			msgs = append(msgs, rejectedMessage(want.egress.Rejected))
		}
		egress = cond(gatev1.ConditionEgressEnforced, false, reason, strings.Join(msgs, "; "))
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
		if (c.Reason == ReasonShadowedByPolicy || c.Type == gatev1.ConditionEgressEnforced && len(want.egress.Rejected) > 0) &&
			!conditionIs(p.Status.Conditions, c.Type, c.Status, c.Message) {
			r.Recorder.Eventf(p, nil, "Warning", c.Reason, "EnforceEgress", "%s", c.Message)
		}
		meta.SetStatusCondition(&next.Conditions, c)
	}
	// The digest and hash record what this controller published: the last good bundle is
	// recognised by them (lastGood), so a failed apply changes neither.
	if want.configMapErr == nil {
		next.SnapshotDigest = want.snapshot.Digest
		next.RuleCount = int32(len(want.snapshot.Rules))
		next.BootstrapHash = want.bundle.Hash
	}
	next.BootstrapConfigMap = configMapName(p)
	next.NetworkPolicy = networkPolicyName(p)
	eg := &gatev1.EgressStatus{Mode: want.egress.Mode, Addresses: int32(want.egress.Addresses)}
	if want.egressKept && p.Status.Egress != nil {
		// The NetworkPolicy in force is the one the last status described; nothing is resolved
		// for it until the rules compile.
		eg = p.Status.Egress.DeepCopy()
		eg.Mode, eg.NextResolveTime = want.egress.Mode, nil
	} else if res := want.resolution; res != nil {
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

// heldBackWhy says why the spec's rules cannot be published, for the egress condition.
func heldBackWhy(want *desiredState) string {
	if len(want.compileErrs) > 0 {
		return "the rules do not compile"
	}
	return "the rules' bundle is too large to publish"
}

func modePhrase(m gatev1.EgressMode) string {
	if m == gatev1.EgressModeDenyAll {
		return "it denies all egress"
	}
	return "its allow-list"
}

// maxRejectedInMessage bounds the addresses a condition message lists.
const maxRejectedInMessage = 10

// rejectedMessage names the hosts whose DNS answers were left out, with each address and why.
func rejectedMessage(rejected []bootstrap.RejectedAddress) string {
	var b strings.Builder
	for i, r := range rejected {
		if i == maxRejectedInMessage {
			fmt.Fprintf(&b, " and %d more", len(rejected)-i)
			break
		}
		switch {
		case i == 0:
			fmt.Fprintf(&b, "%s resolved to ", r.Host)
		case r.Host != rejected[i-1].Host:
			fmt.Fprintf(&b, "; %s resolved to ", r.Host)
		default:
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s)", r.Addr, r.Why)
	}
	b.WriteString(": a DNS answer never opens these, so they are left out; to reach a private destination on purpose, list it in spec.egress.allowedCIDRs")
	return b.String()
}

func conditionIs(conds []metav1.Condition, t string, s metav1.ConditionStatus, msg string) bool {
	c := meta.FindStatusCondition(conds, t)
	return c != nil && c.Status == s && c.Message == msg
}
