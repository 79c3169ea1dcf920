package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// newCondition builds a condition of obj's current generation.
func newCondition(obj metav1.Object, typ string, ok bool, reason, msg string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: obj.GetGeneration()}
}

// readyCondition derives Ready from the other conditions, in their order: True with inForce
// as its message when all are True, otherwise False with the first one that is not, its reason,
// and "<type>: <message>".
func readyCondition(obj metav1.Object, inForce string, conds ...metav1.Condition) metav1.Condition {
	for _, c := range conds {
		if c.Status != metav1.ConditionTrue {
			return newCondition(obj, gatev1.ConditionReady, false, c.Reason, c.Type+": "+c.Message)
		}
	}
	return newCondition(obj, gatev1.ConditionReady, true, gatev1.ReasonReady, inForce)
}

// reconcileFailed is the Ready condition of a reconcile that failed before it could compute
// the children (reading them, or building the bundle): the other conditions stay as the last
// reconcile left them.
func reconcileFailed(obj metav1.Object, err error) metav1.Condition {
	return newCondition(obj, gatev1.ConditionReady, false, gatev1.ReasonReconcileFailed,
		"the reconcile failed before it could compute the children: "+err.Error()+"; nothing was changed, and it retries with backoff")
}

// conditionIs reports whether conds has a condition of type t with this status and message.
func conditionIs(conds []metav1.Condition, t string, s metav1.ConditionStatus, msg string) bool {
	c := meta.FindStatusCondition(conds, t)
	return c != nil && c.Status == s && c.Message == msg
}

// patchStatus merge-patches obj's status to next, and sends nothing when next is what obj
// already has: status is obj's own status field, which it sets to next.
func patchStatus[O client.Object, S any](ctx context.Context, c client.Client, obj O, status, next *S) error {
	if equality.Semantic.DeepEqual(status, next) {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	*status = *next
	return c.Status().Patch(ctx, obj, patch)
}

// controllerReference is the owner reference every child carries to the object it belongs to:
// controller, and blocking the owner's foreground deletion until the child is gone.
func controllerReference(owner metav1.Object, kind string) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(gatev1.GroupVersion.String()).
		WithKind(kind).
		WithName(owner.GetName()).
		WithUID(owner.GetUID()).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// getOptional reads key into obj: found is false, with no error, when it does not exist.
func getOptional(ctx context.Context, c client.Reader, key client.ObjectKey, obj client.Object) (found bool, err error) {
	switch err := c.Get(ctx, key, obj); {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, err
	}
}
