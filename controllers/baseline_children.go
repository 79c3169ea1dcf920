package controllers

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/egress"
)

// clusterPolicyKind is the kind of the baseline children's owners.
const clusterPolicyKind = "ClusterHarnessAgentPolicy"

// baselineLabels are the labels of both baseline children.
func baselineLabels() map[string]string {
	return map[string]string{gatev1.LabelManagedBy: gatev1.ManagedByValue, gatev1.LabelBaseline: "true"}
}

// isBaselineChild reports whether obj carries the baseline children's labels.
func isBaselineChild(obj client.Object) bool {
	l := obj.GetLabels()
	return l[gatev1.LabelManagedBy] == gatev1.ManagedByValue && l[gatev1.LabelBaseline] == "true"
}

// baselineOwners are owner references, not controller ones, to every cluster policy selecting
// the namespace: the children are garbage-collected when the last of them goes.
func baselineOwners(selecting []*gatev1.ClusterHarnessAgentPolicy) []*metav1ac.OwnerReferenceApplyConfiguration {
	refs := make([]*metav1ac.OwnerReferenceApplyConfiguration, 0, len(selecting))
	for _, c := range selecting {
		refs = append(refs, metav1ac.OwnerReference().
			WithAPIVersion(gatev1.GroupVersion.String()).WithKind(clusterPolicyKind).WithName(c.Name).WithUID(c.UID))
	}
	return refs
}

// apply server-side applies the children that differ from what the cache holds, so a steady
// state sends no write. Each apply carries the whole object with ForceOwnership, so a child
// deleted or edited by hand is restored, and a cluster policy that stops selecting the
// namespace leaves the owner references (SSA drops what the field manager no longer applies).
// As for a namespace policy, egress never changes ahead of the bundle it belongs to.
func (r *BaselineReconciler) apply(ctx context.Context, namespace string, o *baselineObserved, want *baselineDesired) error {
	owners := baselineOwners(o.selecting)
	if !baselineConfigMapMatches(o.configMap, want.bundle, o.selecting) {
		cm := corev1ac.ConfigMap(bootstrap.BaselineConfigMap, namespace).
			WithLabels(baselineLabels()).
			WithAnnotations(map[string]string{gatev1.AnnotationBootstrapHash: want.bundle.Hash}).
			WithOwnerReferences(owners...).
			WithData(want.bundle.Data)
		if err := r.Client.Apply(ctx, cm, client.FieldOwner(gatev1.FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying ConfigMap %s/%s: %w", namespace, bootstrap.BaselineConfigMap, err)
		}
		log.FromContext(ctx).V(1).Info("published the baseline bundle", "namespace", namespace, "bootstrapHash", want.bundle.Hash, "layers", len(o.layers))
		if want.tooLarge != nil {
			for _, c := range o.selecting {
				r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, gatev1.ReasonLayersTooLarge, "Render",
					"the baseline bundle of namespace %s blocks every call of the pods it governs: %v; lower the number or size of the cluster policies selecting it", namespace, want.tooLarge)
			}
		}
	}
	if baselineNetworkPolicyMatches(o.networkPolicy, want, o.selecting) {
		return nil
	}
	np := networkingv1ac.NetworkPolicy(BaselineNetworkPolicy, namespace).
		WithLabels(baselineLabels()).
		WithOwnerReferences(owners...).
		WithSpec(want.egress.Spec)
	if want.ceilings != "" {
		np.WithAnnotations(map[string]string{gatev1.AnnotationEgressCeilings: want.ceilings})
	}
	ac, err := withEmptyEgress(np)
	if err == nil {
		err = r.Client.Apply(ctx, ac, client.FieldOwner(gatev1.FieldManager), client.ForceOwnership)
	}
	if err != nil {
		return fmt.Errorf("applying NetworkPolicy %s/%s: %w", namespace, BaselineNetworkPolicy, err)
	}
	return nil
}

// remove deletes the children of a namespace no cluster policy selects any more. Their owner
// references delete them only once every cluster policy owning them is gone (and only where a
// garbage collector runs); a namespace relabelled out loses its baseline now. Each delete is
// bound to the UID read, so a child recreated meanwhile is left to the next reconcile.
func (r *BaselineReconciler) remove(ctx context.Context, o *baselineObserved) error {
	var children []client.Object
	if o.configMap != nil {
		children = append(children, o.configMap)
	}
	if o.networkPolicy != nil {
		children = append(children, o.networkPolicy)
	}
	for _, obj := range children {
		if !isBaselineChild(obj) {
			continue // not ours: a NetworkPolicy of that name someone else wrote
		}
		uid := obj.GetUID()
		err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting the baseline's %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
		}
		log.FromContext(ctx).V(1).Info("removed a baseline child: no cluster policy selects the namespace", "namespace", obj.GetNamespace(), "name", obj.GetName())
	}
	return nil
}

func kindOf(obj client.Object) string {
	if _, ok := obj.(*corev1.ConfigMap); ok {
		return "ConfigMap"
	}
	return "NetworkPolicy"
}

// sameClusterOwners reports whether the object's owner references to cluster policies are
// exactly those to the selecting ones (references of other kinds are someone else's).
func sameClusterOwners(refs []metav1.OwnerReference, selecting []*gatev1.ClusterHarnessAgentPolicy) bool {
	want := make(map[types.UID]string, len(selecting))
	for _, c := range selecting {
		want[c.UID] = c.Name
	}
	n := 0
	for _, ref := range refs {
		if ref.Kind != clusterPolicyKind || ref.APIVersion != gatev1.GroupVersion.String() {
			continue
		}
		if name, ok := want[ref.UID]; !ok || name != ref.Name || ref.Controller != nil && *ref.Controller {
			return false
		}
		n++
	}
	return n == len(want)
}

// baselineConfigMapMatches reports whether cm holds the bundle, with the labels and owners the
// apply sets. Only what the apply sets is compared: keys someone else added are theirs under
// server-side apply, and the bootstrap hash annotation changes with every file of the bundle.
func baselineConfigMapMatches(cm *corev1.ConfigMap, bundle bootstrap.Bundle, selecting []*gatev1.ClusterHarnessAgentPolicy) bool {
	if cm == nil || !isBaselineChild(cm) || cm.Annotations[gatev1.AnnotationBootstrapHash] != bundle.Hash || !sameClusterOwners(cm.OwnerReferences, selecting) {
		return false
	}
	for k, v := range bundle.Data {
		if got, ok := cm.Data[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// baselineNetworkPolicyMatches reports whether np is the NetworkPolicy to apply: labels,
// owners, the ceilings annotation and the spec but its ingress, which is not ours.
func baselineNetworkPolicyMatches(np *networkingv1.NetworkPolicy, want *baselineDesired, selecting []*gatev1.ClusterHarnessAgentPolicy) bool {
	if np == nil || !isBaselineChild(np) || np.Annotations[gatev1.AnnotationEgressCeilings] != want.ceilings || !sameClusterOwners(np.OwnerReferences, selecting) {
		return false
	}
	return egressSpecMatches(&np.Spec, want.egress.Spec)
}

// baselineEgress renders the baseline's NetworkPolicy: the pods labelled gatev1.LabelBaseline
// may reach what every ceiling allows (the first as the spec, the others as its ceilings), and
// with no ceiling nothing at all, as a namespace policy without egress. The canary's control
// port is always allowed.
func baselineEgress(ceilings []egress.Ceiling, dns egress.DNSSelector, canary egress.Canary, cluster []netip.Prefix) egress.Egress {
	spec := &gatev1.HarnessAgentPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{gatev1.LabelBaseline: "true"}}}
	var hosts map[string][]netip.Addr
	if len(ceilings) > 0 {
		spec.Egress, hosts, ceilings = *ceilings[0].Spec, ceilings[0].HostAddrs, ceilings[1:]
	}
	return egress.RenderEgress(spec, hosts, dns, canary, cluster, ceilings)
}
