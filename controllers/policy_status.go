package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/egress"
)

// policyConditions derives the conditions of a reconcile from what it computed and applied:
// each phase owns one (the rules, the bootstrap bundle, the egress), and Ready is derived.
func policyConditions(p *gatev1.HarnessAgentPolicy, want *desiredState, applied policyApplied) []metav1.Condition {
	rules, rendered, enforced := rulesCondition(p, want), bootstrapCondition(p, want, applied), egressCondition(p, want, applied)
	return []metav1.Condition{readyCondition(p, "the policy is in force", rules, rendered, enforced), rules, rendered, enforced}
}

func rulesCondition(p *gatev1.HarnessAgentPolicy, want *desiredState) metav1.Condition {
	if len(want.build.CompileErrs) == 0 {
		return newCondition(p, gatev1.ConditionRulesCompiled, true, gatev1.ReasonCompiled, fmt.Sprintf("%d rules compiled", len(p.Spec.Rules)))
	}
	var msgs []string
	for _, e := range want.build.CompileErrs {
		msgs = append(msgs, e.Error())
	}
	return newCondition(p, gatev1.ConditionRulesCompiled, false, gatev1.ReasonCompileFailed, strings.Join(msgs, "; ")+"; fix the rules, the gate keeps deciding with the snapshot in force")
}

func bootstrapCondition(p *gatev1.HarnessAgentPolicy, want *desiredState, applied policyApplied) metav1.Condition {
	cmName := bootstrap.ConfigMapName(p.Name)
	cond := func(ok bool, reason, msg string) metav1.Condition {
		return newCondition(p, gatev1.ConditionBootstrapRendered, ok, reason, msg)
	}
	switch {
	case applied.configMapErr != nil:
		return cond(false, gatev1.ReasonApplyFailed,
			fmt.Sprintf("applying ConfigMap %s failed, so sandboxes keep the bundle in force before this generation: %v", cmName, applied.configMapErr))
	case layersTooLarge(want.build.RenderErr):
		return cond(false, gatev1.ReasonLayersTooLarge,
			fmt.Sprintf("%v: ConfigMap %s carries a snapshot that blocks every call, since a namespace never runs without its cluster layers; shorten the rules, or narrow the cluster policies' namespaceSelectors", want.build.RenderErr, cmName))
	case want.build.RenderErr != nil && want.build.Kept:
		return cond(false, gatev1.ReasonBundleTooLarge,
			fmt.Sprintf("%v: ConfigMap %s keeps the last snapshot published (generation %d); shorten the rules or split the policy", want.build.RenderErr, cmName, want.build.Snapshot.Generation))
	case want.build.RenderErr != nil:
		return cond(false, gatev1.ReasonBundleTooLarge,
			fmt.Sprintf("%v: ConfigMap %s carries a snapshot that blocks every call; shorten the rules or split the policy", want.build.RenderErr, cmName))
	case want.build.Kept:
		return cond(false, gatev1.ReasonLastGoodKept,
			fmt.Sprintf("ConfigMap %s keeps the last snapshot that compiled (generation %d) until the rules compile", cmName, want.build.Snapshot.Generation))
	case len(want.build.CompileErrs) > 0:
		return cond(false, gatev1.ReasonPolicyInvalid,
			fmt.Sprintf("the rules do not compile and there is no snapshot this controller published to keep: ConfigMap %s carries a snapshot that blocks every call", cmName))
	}
	return cond(true, gatev1.ReasonRendered, fmt.Sprintf("ConfigMap %s holds bootstrap %s", cmName, want.build.Bundle.Hash))
}

func egressCondition(p *gatev1.HarnessAgentPolicy, want *desiredState, applied policyApplied) metav1.Condition {
	npName := networkPolicyName(p)
	cond := func(ok bool, reason, msg string) metav1.Condition {
		return newCondition(p, gatev1.ConditionEgressEnforced, ok, reason, msg)
	}
	switch {
	case applied.networkPolicyErr != nil:
		return cond(false, gatev1.ReasonApplyFailed,
			fmt.Sprintf("applying NetworkPolicy %s failed, so the egress in force before this generation stays: %v", npName, applied.networkPolicyErr))
	case len(want.shadowing) > 0:
		return cond(false, gatev1.ReasonShadowedByPolicy,
			fmt.Sprintf("NetworkPolicy %s also selects governed pods and allows egress; NetworkPolicy allows add up, so it reopens what %s denies: narrow its podSelector or remove its egress rules", strings.Join(want.shadowing, ", "), npName))
	case want.egressKept:
		return cond(false, gatev1.ReasonLastGoodKept,
			fmt.Sprintf("%s, so NetworkPolicy %s keeps the egress in force (%s); spec.egress is applied once the rules can be published", heldBackWhy(want), npName, modePhrase(want.egress.Mode)))
	case want.build.HeldBack():
		return cond(false, gatev1.ReasonPolicyInvalid,
			fmt.Sprintf("%s and there is no egress in force to keep: NetworkPolicy %s denies all egress until the rules can be published", heldBackWhy(want), npName))
	case want.resolution != nil && len(want.resolution.Unresolved) > 0 || len(want.egress.Rejected) > 0:
		var msgs []string
		reason := gatev1.ReasonAddressesRejected
		if want.resolution != nil && len(want.resolution.Unresolved) > 0 {
			reason = gatev1.ReasonHostsUnresolved
			msgs = append(msgs, fmt.Sprintf("%s resolved to no address and cannot be reached; check the names, or that the manager can reach DNS", strings.Join(want.resolution.Unresolved, ", ")))
		}
		if len(want.egress.Rejected) > 0 {
			msgs = append(msgs, rejectedMessage(want.egress.Rejected))
		}
		return cond(false, reason, strings.Join(msgs, "; "))
	case len(want.egress.OutsideCeiling) > 0:
		return cond(false, gatev1.ReasonOutsideCeiling,
			fmt.Sprintf("NetworkPolicy %s leaves out %s: outside the egress ceiling of ClusterHarnessAgentPolicy %s, and not reachable; ask the platform team to widen the ceiling, or drop them from spec.egress",
				npName, strings.Join(want.egress.OutsideCeiling, ", "), strings.Join(want.egress.Ceilings, ", ")))
	case want.egress.Mode == gatev1.EgressModeAllowList:
		return cond(true, gatev1.ReasonEnforced, fmt.Sprintf("NetworkPolicy %s allows DNS and %d addresses and %d CIDRs", npName, want.egress.Addresses, len(p.Spec.Egress.AllowedCIDRs)))
	}
	return cond(true, gatev1.ReasonEnforced, fmt.Sprintf("NetworkPolicy %s denies all egress", npName))
}

// writeStatus writes the status once, and only when it changed. Events mark the transitions
// an operator of the cluster must see.
// want is nil when the reconcile could not gather or compute (reconcileErr says why): Ready
// says so, and the rest of the status stays as it was.
func (r *HarnessAgentPolicyReconciler) writeStatus(ctx context.Context, p *gatev1.HarnessAgentPolicy, want *desiredState, applied policyApplied, reconcileErr error) error {
	next := p.Status.DeepCopy()
	if want == nil {
		if reconcileErr == nil {
			return nil
		}
		meta.SetStatusCondition(&next.Conditions, reconcileFailed(p, reconcileErr))
		return patchStatus(ctx, r.Client, p, &p.Status, next)
	}
	next.ObservedGeneration = p.Generation
	for _, c := range policyConditions(p, want, applied) {
		if c.Reason == gatev1.ReasonCompileFailed && !conditionIs(p.Status.Conditions, c.Type, c.Status, c.Message) {
			r.Recorder.Eventf(p, nil, "Warning", gatev1.ReasonCompileFailed, "Compile", "%s", c.Message)
		}
		if (c.Reason == gatev1.ReasonShadowedByPolicy || c.Type == gatev1.ConditionEgressEnforced && len(want.egress.Rejected) > 0) &&
			!conditionIs(p.Status.Conditions, c.Type, c.Status, c.Message) {
			r.Recorder.Eventf(p, nil, "Warning", c.Reason, "EnforceEgress", "%s", c.Message)
		}
		meta.SetStatusCondition(&next.Conditions, c)
	}
	// The digest and hash record what this controller published: the last good bundle is
	// recognised by them (lastGood), so a failed apply changes neither.
	if applied.configMapErr == nil {
		next.SnapshotDigest = want.build.Snapshot.Digest
		next.RuleCount = int32(len(want.build.Snapshot.Rules))
		next.Enforcement = gatev1.Enforcement(want.build.Snapshot.Mode())
		next.AuditedRules = int32(want.build.Snapshot.AuditedRules())
		next.BootstrapHash = want.build.Bundle.Hash
		next.ClusterPolicies = want.build.ClusterPolicies
	}
	next.BootstrapConfigMap = bootstrap.ConfigMapName(p.Name)
	next.NetworkPolicy = networkPolicyName(p)
	eg := &gatev1.EgressStatus{Mode: want.egress.Mode, Addresses: int32(want.egress.Addresses),
		Ceilings: want.egress.Ceilings, OutsideCeiling: want.egress.OutsideCeiling}
	if want.egressKept && p.Status.Egress != nil {
		// The NetworkPolicy in force is the one the last status described; nothing is resolved
		// for it until the rules compile.
		eg = p.Status.Egress.DeepCopy()
		eg.Mode = want.egress.Mode
	} else if res := want.resolution; res != nil {
		// Only what a resolution found, not when the next one is due (the requeue keeps that):
		// a resolution that finds what the last one found writes nothing.
		eg.ResolvedHosts = int32(len(res.Resolved))
		eg.UnresolvedHosts = res.Unresolved
	}
	next.Egress = eg
	return patchStatus(ctx, r.Client, p, &p.Status, next)
}

// layersTooLarge reports whether err says the bundle did not fit with its cluster layers.
func layersTooLarge(err error) bool {
	var tooLarge *bootstrap.TooLargeError
	return errors.As(err, &tooLarge) && tooLarge.Layers > 0
}

// heldBackWhy says why the spec's rules cannot be published, for the egress condition.
func heldBackWhy(want *desiredState) string {
	if len(want.build.CompileErrs) > 0 {
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
func rejectedMessage(rejected []egress.RejectedAddress) string {
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
