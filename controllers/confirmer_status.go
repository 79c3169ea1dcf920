package controllers

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// Condition reasons of SessionConfirmer.
const (
	ReasonPolicyResolved    = "PolicyResolved"
	ReasonPolicyNotFound    = "PolicyNotFound"
	ReasonPolicyNotReady    = "PolicyNotReady"
	ReasonSecretMissing     = "SecretMissing"
	ReasonDeploymentPending = "DeploymentPending"
	ReasonAvailable         = "Available"
	ReasonUnavailable       = "Unavailable"
)

func confirmerConditions(sc *gatev1.SessionConfirmer, o *confirmerObserved, deployed bool) []metav1.Condition {
	gen := sc.Generation
	cond := func(t string, ok bool, reason, msg string) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen}
	}
	ref := sc.Spec.PolicyRef.Name
	var policy, available metav1.Condition
	switch {
	case o.policy == nil:
		policy = cond(gatev1.ConditionPolicyResolved, false, ReasonPolicyNotFound,
			fmt.Sprintf("HarnessAgentPolicy %s does not exist in namespace %s; create it or fix spec.policyRef.name", ref, sc.Namespace))
	case !meta.IsStatusConditionTrue(o.policy.Status.Conditions, gatev1.ConditionReady):
		msg := "it has no Ready condition yet"
		if c := meta.FindStatusCondition(o.policy.Status.Conditions, gatev1.ConditionReady); c != nil {
			msg = c.Reason + ": " + c.Message
		}
		policy = cond(gatev1.ConditionPolicyResolved, false, ReasonPolicyNotReady, fmt.Sprintf("HarnessAgentPolicy %s is not Ready: %s", ref, msg))
	default:
		policy = cond(gatev1.ConditionPolicyResolved, true, ReasonPolicyResolved, fmt.Sprintf("HarnessAgentPolicy %s is Ready", ref))
	}
	switch {
	case len(o.missingSecrets) > 0:
		available = cond(gatev1.ConditionAvailable, false, ReasonSecretMissing,
			fmt.Sprintf("Secret key %s does not exist or is empty; the confirmer is not deployed until it does", strings.Join(o.missingSecrets, ", ")))
	case !deployed || o.deployment == nil:
		available = cond(gatev1.ConditionAvailable, false, ReasonDeploymentPending, fmt.Sprintf("Deployment %s is being created", confirmerName(sc)))
	default:
		if c := deploymentCondition(o.deployment, appsv1.DeploymentAvailable); c != nil && c.Status == corev1.ConditionTrue {
			available = cond(gatev1.ConditionAvailable, true, ReasonAvailable, fmt.Sprintf("Deployment %s has %d ready replicas", o.deployment.Name, o.deployment.Status.ReadyReplicas))
		} else {
			msg := "the Deployment reports no Available condition yet"
			if c != nil {
				msg = c.Reason + ": " + c.Message
			}
			available = cond(gatev1.ConditionAvailable, false, ReasonUnavailable, fmt.Sprintf("Deployment %s is not available: %s", confirmerName(sc), msg))
		}
	}
	ready := cond(gatev1.ConditionReady, true, ReasonReady, "the confirmer is answering with a Ready policy")
	for _, c := range []metav1.Condition{policy, available} {
		if c.Status != metav1.ConditionTrue {
			ready = cond(gatev1.ConditionReady, false, c.Reason, c.Type+": "+c.Message)
			break
		}
	}
	return []metav1.Condition{ready, policy, available}
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

func (r *SessionConfirmerReconciler) writeConfirmerStatus(ctx context.Context, sc *gatev1.SessionConfirmer, o *confirmerObserved, deployed bool) error {
	next := sc.Status.DeepCopy()
	next.ObservedGeneration = sc.Generation
	for _, c := range confirmerConditions(sc, o, deployed) {
		meta.SetStatusCondition(&next.Conditions, c)
	}
	next.ReadyReplicas = 0
	if o.deployment != nil {
		next.ReadyReplicas = o.deployment.Status.ReadyReplicas
	}
	next.ServiceURL = ""
	if deployed {
		next.ServiceURL = fmt.Sprintf("http://%s.%s.svc:%d", confirmerName(sc), sc.Namespace, confirmerPort)
	}
	next.SnapshotDigest = ""
	if o.policy != nil {
		next.SnapshotDigest = o.policy.Status.SnapshotDigest
	}
	if equality.Semantic.DeepEqual(&sc.Status, next) {
		return nil
	}
	patch := client.MergeFrom(sc.DeepCopy())
	sc.Status = *next
	return r.Client.Status().Patch(ctx, sc, patch)
}
