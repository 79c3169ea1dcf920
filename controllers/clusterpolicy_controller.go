package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
)

// +kubebuilder:rbac:groups=gate.intutic.io,resources=clusterharnessagentpolicies,verbs=list;watch
// +kubebuilder:rbac:groups=gate.intutic.io,resources=clusterharnessagentpolicies/status,verbs=patch

// ClusterHarnessAgentPolicyReconciler reports a cluster policy's state: whether its rules
// compiled, the digest of its snapshot, and how many namespaces and pods it governs. Its layer
// reaches the pods through the namespace policies' bundles, which HarnessAgentPolicyReconciler
// renders, and the namespaces' baseline bundles, which BaselineReconciler renders; this
// controller writes nothing but status.
type ClusterHarnessAgentPolicyReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// ManagerNamespace is the manager's own namespace, which has no baseline bundle
	// (BaselineReconciler's).
	ManagerNamespace string
}

// Reconcile implements reconcile.Reconciler.
func (r *ClusterHarnessAgentPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &gatev1.ClusterHarnessAgentPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	next := c.Status.DeepCopy()
	next.ObservedGeneration = c.Generation
	compiled, err := r.compile(c, next)
	if err != nil {
		meta.SetStatusCondition(&next.Conditions, reconcileFailed(c, err))
		return ctrl.Result{}, errors.Join(err, patchStatus(ctx, r.Client, c, &c.Status, next))
	}
	if compiled.Reason == gatev1.ReasonCompileFailed && !conditionIs(c.Status.Conditions, compiled.Type, compiled.Status, compiled.Message) {
		r.Recorder.Eventf(c, nil, "Warning", gatev1.ReasonCompileFailed, "Compile", "%s", compiled.Message)
	}
	namespaces, pods, err := r.governed(ctx, c)
	if err != nil {
		meta.SetStatusCondition(&next.Conditions, reconcileFailed(c, err))
		return ctrl.Result{}, errors.Join(err, patchStatus(ctx, r.Client, c, &c.Status, next))
	}
	next.Namespaces, next.Pods = namespaces, pods
	meta.SetStatusCondition(&next.Conditions, compiled)
	meta.SetStatusCondition(&next.Conditions, readyCondition(c, fmt.Sprintf("the layer is in force in %d namespaces", namespaces), compiled))
	return ctrl.Result{}, patchStatus(ctx, r.Client, c, &c.Status, next)
}

// compile builds the layer as the bundles of workspace "" carry it (the digest is per
// workspace: the snapshot is bound to it) and records what it holds.
func (r *ClusterHarnessAgentPolicyReconciler) compile(c *gatev1.ClusterHarnessAgentPolicy, next *gatev1.ClusterHarnessAgentPolicyStatus) (metav1.Condition, error) {
	if _, err := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector); err != nil {
		return newCondition(c, gatev1.ConditionRulesCompiled, false, gatev1.ReasonPolicyInvalid,
			fmt.Sprintf("spec.namespaceSelector: %v: the policy selects no namespace until it is fixed", err)), nil
	}
	layer, errs, err := bootstrap.ClusterLayerOf(c, "")
	if err != nil {
		// An invalid pod selector: no layer can be built, and the namespace policies' reconciles
		// fail and say so rather than publish their bundles without it.
		return newCondition(c, gatev1.ConditionRulesCompiled, false, gatev1.ReasonPolicyInvalid,
			err.Error()+": the bundles of the selected namespaces are not updated until it is fixed"), nil
	}
	snap, err := gate.LoadSnapshot(layer.Snapshot, "")
	if err != nil {
		return metav1.Condition{}, fmt.Errorf("reading back the layer's snapshot: %w", err)
	}
	next.SnapshotDigest = layer.Digest
	next.RuleCount = int32(len(snap.Rules))
	next.Enforcement = gatev1.Enforcement(snap.Mode())
	next.AuditedRules = int32(snap.AuditedRules())
	if len(errs) > 0 {
		msgs := make([]string, 0, len(errs))
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return newCondition(c, gatev1.ConditionRulesCompiled, false, gatev1.ReasonCompileFailed,
			strings.Join(msgs, "; ")+"; until they compile, the layer blocks every call of the pods it selects"), nil
	}
	return newCondition(c, gatev1.ConditionRulesCompiled, true, gatev1.ReasonCompiled, fmt.Sprintf("%d rules compiled", len(c.Spec.Rules))), nil
}

// governed counts the namespaces the layer is in force in and the pods there it decides for.
// Every namespace the namespaceSelector selects has the layer in its baseline bundle (but the
// system namespaces and the manager's, which get no baseline: BaselineReconciler) and in the
// bundles of its namespace policies. Its pods are those that mount one of these bundles (a
// namespace policy selects them, or the injection labelled them gatev1.LabelBaseline for the
// baseline) and that the layer's podSelector selects.
func (r *ClusterHarnessAgentPolicyReconciler) governed(ctx context.Context, c *gatev1.ClusterHarnessAgentPolicy) (namespaces, pods int32, err error) {
	podSel, err := metav1.LabelSelectorAsSelector(&c.Spec.PodSelector)
	if err != nil {
		return 0, 0, nil // no layer: it governs nothing (compile says why)
	}
	nsSel, err := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector)
	if err != nil {
		return 0, 0, nil // it selects no namespace (compile says why)
	}
	var policies gatev1.HarnessAgentPolicyList
	if err := r.Client.List(ctx, &policies, client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, fmt.Errorf("listing HarnessAgentPolicies: %w", err)
	}
	byNamespace := map[string][]labels.Selector{}
	for i := range policies.Items {
		p := &policies.Items[i]
		if sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector); err == nil {
			byNamespace[p.Namespace] = append(byNamespace[p.Namespace], sel)
		}
	}
	selected := &metav1.PartialObjectMetadataList{}
	selected.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := r.Client.List(ctx, selected, client.MatchingLabelsSelector{Selector: nsSel}, client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, fmt.Errorf("listing namespaces: %w", err)
	}
	for _, ns := range selected.Items {
		selectors := byNamespace[ns.Name]
		if !baselineNamespace(ns.Name, r.ManagerNamespace) && len(selectors) == 0 {
			continue
		}
		namespaces++
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := r.Client.List(ctx, list, client.InNamespace(ns.Name), client.UnsafeDisableDeepCopy); err != nil {
			return 0, 0, fmt.Errorf("listing the pods of namespace %s: %w", ns.Name, err)
		}
		for _, pod := range list.Items {
			set := labels.Set(pod.Labels)
			if podSel.Matches(set) && (anyMatches(selectors, set) || set[gatev1.LabelBaseline] == "true") {
				pods++
			}
		}
	}
	return namespaces, pods, nil
}

func anyMatches(selectors []labels.Selector, set labels.Set) bool {
	for _, s := range selectors {
		if s.Matches(set) {
			return true
		}
	}
	return false
}

// allClusterPolicies enqueues every cluster policy: a namespace policy, a namespace's labels
// or a pod changing may change what any of them governs.
func (r *ClusterHarnessAgentPolicyReconciler) allClusterPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	var list gatev1.ClusterHarnessAgentPolicyList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing ClusterHarnessAgentPolicies to recount what they govern")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return reqs
}

// SetupWithManager registers the controller.
func (r *ClusterHarnessAgentPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(r.allClusterPolicies)
	return ctrl.NewControllerManagedBy(mgr).
		For(&gatev1.ClusterHarnessAgentPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&gatev1.HarnessAgentPolicy{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesMetadata(&corev1.Namespace{}, all, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WatchesMetadata(&corev1.Pod{}, all, builder.WithPredicates(podLabelsChanged())).
		Named("clusterharnessagentpolicy").
		Complete(r)
}
