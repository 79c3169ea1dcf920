package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/egress"
)

// The watches of NetworkPolicies and pods enqueue only the policies whose shadowing an event
// can change. Enqueueing every policy in the namespace instead makes creating n policies in a
// namespace cost n² reconciles: each one's NetworkPolicy would wake all the others.

// policiesShadowedBy enqueues the policies whose shadowing an event of the NetworkPolicy np
// may change: those it shadows, as shadowingPolicies decides. An update maps the old object
// and the new one, so the policies it stops shadowing are enqueued too. A NetworkPolicy that
// allows no egress shadows nobody, so the policies' own deny-all children enqueue only their
// owner (Owns), not every policy in the namespace.
func (r *HarnessAgentPolicyReconciler) policiesShadowedBy(ctx context.Context, obj client.Object) []reconcile.Request {
	np, ok := obj.(*networkingv1.NetworkPolicy)
	if !ok || !egress.AllowsEgress(np) {
		return nil
	}
	theirs, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		return nil
	}
	var podLabels []map[string]string
	if !theirs.Empty() {
		if podLabels, err = r.podLabels(ctx, np.Namespace); err != nil {
			log.FromContext(ctx).Error(err, "listing pods to re-check shadowing", "namespace", np.Namespace)
			return nil
		}
		if len(podLabels) == 0 {
			return nil // it selects no pod, so it shadows no policy
		}
	}
	return r.policiesInNamespace(ctx, np.Namespace, func(p *gatev1.HarnessAgentPolicy) bool {
		if np.Name == networkPolicyName(p) {
			return false // its own: Owns enqueues it
		}
		ours, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		return err == nil && (theirs.Empty() || anyPodSelected(ours, theirs, podLabels))
	})
}

// policiesGoverning enqueues the policies that select the pod: only their shadowing can change
// when it comes, goes or is relabelled (an update maps the old labels and the new ones).
func (r *HarnessAgentPolicyReconciler) policiesGoverning(ctx context.Context, pod client.Object) []reconcile.Request {
	set := labels.Set(pod.GetLabels())
	return r.policiesInNamespace(ctx, pod.GetNamespace(), func(p *gatev1.HarnessAgentPolicy) bool {
		ours, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		return err == nil && ours.Matches(set)
	})
}

// policiesInNamespace returns a request for each policy in the namespace that keep accepts.
func (r *HarnessAgentPolicyReconciler) policiesInNamespace(ctx context.Context, namespace string, keep func(*gatev1.HarnessAgentPolicy) bool) []reconcile.Request {
	var list gatev1.HarnessAgentPolicyList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing policies to re-check shadowing", "namespace", namespace)
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if p := &list.Items[i]; keep(p) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
		}
	}
	return reqs
}

// shadowIndex indexes the NetworkPolicies that allow egress by whom they select: shadowAll
// for every pod in the namespace, shadowSome for some. The others cannot shadow anything, and
// a policy with no pod in its namespace can only be shadowed by the first kind; so a reconcile
// reads the few NetworkPolicies that matter, not all of its namespace's.
const (
	shadowIndex = "gate.intutic.io/shadows"
	shadowAll   = "all"
	shadowSome  = "some"
)

func shadowIndexValue(obj client.Object) []string {
	np, ok := obj.(*networkingv1.NetworkPolicy)
	switch {
	case !ok || !egress.AllowsEgress(np):
		return nil
	case selectsAll(&np.Spec.PodSelector):
		return []string{shadowAll}
	}
	return []string{shadowSome}
}

// mayShadow lists the other NetworkPolicies in the policy's namespace that may shadow its own:
// those that allow egress and select every pod, and with pods in the namespace those that
// select some.
func (r *HarnessAgentPolicyReconciler) mayShadow(ctx context.Context, p *gatev1.HarnessAgentPolicy, pods bool) ([]networkingv1.NetworkPolicy, error) {
	kinds := []string{shadowAll}
	if pods {
		kinds = append(kinds, shadowSome)
	}
	var out []networkingv1.NetworkPolicy
	for _, kind := range kinds {
		var nps networkingv1.NetworkPolicyList
		if err := r.Client.List(ctx, &nps, client.InNamespace(p.Namespace), client.MatchingFields{shadowIndex: kind}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		for _, np := range nps.Items {
			if np.Name != networkPolicyName(p) {
				out = append(out, np)
			}
		}
	}
	return out, nil
}

// podLabels lists the labels of the pods in the namespace, from the metadata-only cache.
func (r *HarnessAgentPolicyReconciler) podLabels(ctx context.Context, namespace string) ([]map[string]string, error) {
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := r.Client.List(ctx, pods, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]map[string]string, 0, len(pods.Items))
	for _, pod := range pods.Items {
		out = append(out, pod.Labels)
	}
	return out, nil
}
