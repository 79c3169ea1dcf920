package controllers

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// confirmerConditions derives the conditions of a reconcile: the policy it answers with, the
// Deployment that answers, and Ready from both.
func confirmerConditions(sc *gatev1.SessionConfirmer, o *confirmerObserved, applied confirmerApplied) []metav1.Condition {
	policy, available := policyResolvedCondition(sc, o), availableCondition(sc, o, applied)
	return []metav1.Condition{readyCondition(sc, "the confirmer is answering with a Ready policy", policy, available), policy, available}
}

func policyResolvedCondition(sc *gatev1.SessionConfirmer, o *confirmerObserved) metav1.Condition {
	ref := sc.PolicyDisplayName()
	cond := func(ok bool, reason, msg string) metav1.Condition {
		return newCondition(sc, gatev1.ConditionPolicyResolved, ok, reason, msg)
	}
	switch {
	case o.refused != "":
		return cond(false, gatev1.ReasonPolicyNamespaceForbidden, o.refused+"; nothing is deployed")
	case o.policy == nil:
		return cond(false, gatev1.ReasonPolicyNotFound,
			fmt.Sprintf("HarnessAgentPolicy %s does not exist in namespace %s; create it or fix spec.policyRef", sc.Spec.PolicyRef.Name, sc.PolicyNamespace()))
	case sc.CrossNamespace() && o.bundle == nil:
		return cond(false, gatev1.ReasonPolicyNotReady,
			fmt.Sprintf("HarnessAgentPolicy %s has no published bootstrap ConfigMap %s (missing, not yet published, or edited by hand): the confirmer is deployed with a copy of it once it has, and a copy in force stays", ref, bootstrapConfigMapName(o.policy)))
	case !meta.IsStatusConditionTrue(o.policy.Status.Conditions, gatev1.ConditionReady):
		msg := "it has no Ready condition yet"
		if c := meta.FindStatusCondition(o.policy.Status.Conditions, gatev1.ConditionReady); c != nil {
			msg = c.Reason + ": " + c.Message
		}
		return cond(false, gatev1.ReasonPolicyNotReady, fmt.Sprintf("HarnessAgentPolicy %s is not Ready: %s", ref, msg))
	}
	return cond(true, gatev1.ReasonPolicyResolved, fmt.Sprintf("HarnessAgentPolicy %s is Ready", ref))
}

func availableCondition(sc *gatev1.SessionConfirmer, o *confirmerObserved, applied confirmerApplied) metav1.Condition {
	cond := func(ok bool, reason, msg string) metav1.Condition {
		return newCondition(sc, gatev1.ConditionAvailable, ok, reason, msg)
	}
	switch {
	case o.refused != "":
		return cond(false, gatev1.ReasonPolicyNamespaceForbidden, "nothing is deployed: see PolicyResolved")
	case len(o.missingSecrets) > 0:
		return cond(false, gatev1.ReasonSecretMissing,
			fmt.Sprintf("Secret key %s does not exist or is empty; the confirmer is not deployed until it does", strings.Join(o.missingSecrets, ", ")))
	case applied.err != nil:
		return cond(false, gatev1.ReasonApplyFailed, fmt.Sprintf("applying %v (the API server refused it; the children in force stay)", applied.err))
	case !applied.attempted || o.deployment == nil:
		return cond(false, gatev1.ReasonDeploymentPending, fmt.Sprintf("Deployment %s is being created", confirmerName(sc)))
	}
	if c := deploymentCondition(o.deployment, appsv1.DeploymentAvailable); c != nil && c.Status == corev1.ConditionTrue {
		return cond(true, gatev1.ReasonAvailable, fmt.Sprintf("Deployment %s has %d ready replicas", o.deployment.Name, o.deployment.Status.ReadyReplicas))
	} else if c != nil {
		return cond(false, gatev1.ReasonUnavailable, fmt.Sprintf("Deployment %s is not available: %s: %s", confirmerName(sc), c.Reason, c.Message))
	}
	return cond(false, gatev1.ReasonUnavailable, fmt.Sprintf("Deployment %s is not available: the Deployment reports no Available condition yet", confirmerName(sc)))
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// writeConfirmerStatus writes the status once, and only when it changed. o is nil when the
// reconcile could not gather what it needs (reconcileErr says why): Ready says so, and the
// rest of the status stays as it was.
func (r *SessionConfirmerReconciler) writeConfirmerStatus(ctx context.Context, sc *gatev1.SessionConfirmer, o *confirmerObserved, applied confirmerApplied, reconcileErr error) error {
	next := sc.Status.DeepCopy()
	if o == nil {
		if reconcileErr == nil {
			return nil
		}
		meta.SetStatusCondition(&next.Conditions, reconcileFailed(sc, reconcileErr))
		return patchStatus(ctx, r.Client, sc, &sc.Status, next)
	}
	next.ObservedGeneration = sc.Generation
	for _, c := range confirmerConditions(sc, o, applied) {
		meta.SetStatusCondition(&next.Conditions, c)
	}
	next.ReadyReplicas = 0
	if o.deployment != nil {
		next.ReadyReplicas = o.deployment.Status.ReadyReplicas
	}
	next.ServiceURL = ""
	if applied.attempted {
		next.ServiceURL = fmt.Sprintf("http://%s.%s.svc:%d", confirmerName(sc), sc.Namespace, confirmerPort)
	}
	next.Policy = sc.PolicyDisplayName()
	next.SnapshotDigest = ""
	if o.policy != nil {
		next.SnapshotDigest = o.policy.Status.SnapshotDigest
	}
	return patchStatus(ctx, r.Client, sc, &sc.Status, next)
}
