package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	admissionregistrationv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch

// The pod webhook entries of the manager's own configurations that the per-cluster-policy
// entries are made like: their service, CA bundle and path are the ones the install and the
// certificate rotation keep current.
const (
	staticPodMutatingEntry   = "pods.gate.intutic.io"
	staticPodValidatingEntry = "governed-pods.gate.intutic.io"
	// clusterEntrySuffix names a cluster policy's entries: <policy>.cluster-pods.gate.intutic.io.
	clusterEntrySuffix = ".cluster-pods.gate.intutic.io"
)

// ClusterPolicyWebhooksReconciler keeps one pod webhook entry per ClusterHarnessAgentPolicy in
// the MutatingWebhookConfiguration and ValidatingWebhookConfiguration named Configuration, which
// the install creates empty (so they go with it, and no failurePolicy Fail entry outlives the
// operator). Each entry sends the pods its policy selects (namespaceSelector and podSelector;
// never a system namespace or the operator's, nor a pod with the opt-in label, which the
// manager's own entries take) to the pod webhook, failurePolicy Fail: while no manager answers,
// only the pods some cluster policy selects are refused. The entries copy the service and CA
// bundle of the manager's own pod entries (in the configurations named Static), so they follow
// the certificate whoever issues it.
type ClusterPolicyWebhooksReconciler struct {
	Client client.Client
	// Configuration names the configurations the entries are applied to.
	Configuration string
	// Static names the manager's own webhook configurations.
	Static string
}

// ClusterPolicyWebhooksSuffix names the cluster policies' webhook configurations after the
// manager's own: gate-operator-cluster-policies beside gate-operator.
const ClusterPolicyWebhooksSuffix = "-cluster-policies"

// clusterWebhooksKey is the one request this reconciler serves: every event changes the same
// two objects.
var clusterWebhooksKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "cluster-policies"}}

// Reconcile implements reconcile.Reconciler.
func (r *ClusterPolicyWebhooksReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var list gatev1.ClusterHarnessAgentPolicyList
	if err := r.Client.List(ctx, &list); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing ClusterHarnessAgentPolicies: %w", err)
	}
	policies := slices.DeleteFunc(list.Items, func(c gatev1.ClusterHarnessAgentPolicy) bool { return !c.DeletionTimestamp.IsZero() })
	slices.SortFunc(policies, func(a, b gatev1.ClusterHarnessAgentPolicy) int { return strings.Compare(a.Name, b.Name) })

	static := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: r.Static}, static); err != nil {
		return reconcile.Result{}, fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", r.Static, err)
	}
	staticV := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: r.Static}, staticV); err != nil {
		return reconcile.Result{}, fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", r.Static, err)
	}
	mi := slices.IndexFunc(static.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == staticPodMutatingEntry })
	vi := slices.IndexFunc(staticV.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == staticPodValidatingEntry })
	if mi < 0 || vi < 0 {
		return reconcile.Result{}, fmt.Errorf("the webhook configurations %s have no entry %s or %s to make the cluster policies' entries like", r.Static, staticPodMutatingEntry, staticPodValidatingEntry)
	}

	mutating := admissionregistrationv1ac.MutatingWebhookConfiguration(r.Configuration)
	validating := admissionregistrationv1ac.ValidatingWebhookConfiguration(r.Configuration)
	for i := range policies {
		ns, obj, err := entrySelectors(&policies[i], &static.Webhooks[mi].ClientConfig)
		if err != nil {
			// The validating webhook refuses such a selector; an entry cannot carry it.
			log.FromContext(ctx).Error(err, "a cluster policy's selectors cannot make a webhook entry", "policy", policies[i].Name)
			continue
		}
		name := policies[i].Name + clusterEntrySuffix
		m := admissionregistrationv1ac.MutatingWebhook().WithName(name).
			WithClientConfig(clientConfig(static.Webhooks[mi].ClientConfig)).
			WithNamespaceSelector(ns).WithObjectSelector(obj).
			WithRules(podCreateRule()).
			WithFailurePolicy(admissionregistrationv1.Fail).
			WithMatchPolicy(admissionregistrationv1.Equivalent).
			WithReinvocationPolicy(admissionregistrationv1.IfNeededReinvocationPolicy).
			WithSideEffects(admissionregistrationv1.SideEffectClassNone).
			WithTimeoutSeconds(10).
			WithAdmissionReviewVersions("v1")
		mutating.WithWebhooks(m)
		v := admissionregistrationv1ac.ValidatingWebhook().WithName(name).
			WithClientConfig(clientConfig(staticV.Webhooks[vi].ClientConfig)).
			WithNamespaceSelector(ns).WithObjectSelector(obj).
			WithRules(podCreateRule()).
			WithFailurePolicy(admissionregistrationv1.Fail).
			WithMatchPolicy(admissionregistrationv1.Equivalent).
			WithSideEffects(admissionregistrationv1.SideEffectClassNone).
			WithTimeoutSeconds(10).
			WithAdmissionReviewVersions("v1")
		validating.WithWebhooks(v)
	}
	for _, obj := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
		if err := r.Client.Get(ctx, types.NamespacedName{Name: r.Configuration}, obj); apierrors.IsNotFound(err) {
			// Applied, it would be created, and outlive the install. An install that does not
			// create it runs no cluster policy entries: a selected pod is then governed only if
			// it carries the opt-in label.
			log.FromContext(ctx).Error(err, "the install did not create the cluster policies' webhook configuration; pods a cluster policy selects are not injected unless labelled", "name", r.Configuration)
			return reconcile.Result{}, nil
		} else if err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := r.Client.Apply(ctx, mutating, client.FieldOwner(gatev1.FieldManager), client.ForceOwnership); err != nil {
		return reconcile.Result{}, fmt.Errorf("applying MutatingWebhookConfiguration %s: %w", r.Configuration, err)
	}
	if err := r.Client.Apply(ctx, validating, client.FieldOwner(gatev1.FieldManager), client.ForceOwnership); err != nil {
		return reconcile.Result{}, fmt.Errorf("applying ValidatingWebhookConfiguration %s: %w", r.Configuration, err)
	}
	return reconcile.Result{}, nil
}

// entrySelectors are a cluster policy's entry's selectors: its namespaceSelector without the
// system namespaces and the operator's (the namespace of the webhook's Service), and its
// podSelector without the pods that carry the opt-in label.
func entrySelectors(c *gatev1.ClusterHarnessAgentPolicy, cc *admissionregistrationv1.WebhookClientConfig) (ns, obj *metav1ac.LabelSelectorApplyConfiguration, err error) {
	if _, err := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector); err != nil {
		return nil, nil, fmt.Errorf("spec.namespaceSelector: %w", err)
	}
	if _, err := metav1.LabelSelectorAsSelector(&c.Spec.PodSelector); err != nil {
		return nil, nil, fmt.Errorf("spec.podSelector: %w", err)
	}
	excluded := slices.Clone(gatev1.SystemNamespaces)
	if cc.Service != nil {
		excluded = append(excluded, cc.Service.Namespace)
	}
	slices.Sort(excluded)
	ns = selectorApply(c.Spec.NamespaceSelector).WithMatchExpressions(metav1ac.LabelSelectorRequirement().
		WithKey(corev1.LabelMetadataName).WithOperator(metav1.LabelSelectorOpNotIn).WithValues(slices.Compact(excluded)...))
	obj = selectorApply(c.Spec.PodSelector).WithMatchExpressions(metav1ac.LabelSelectorRequirement().
		WithKey(gatev1.LabelPolicy).WithOperator(metav1.LabelSelectorOpDoesNotExist))
	return ns, obj, nil
}

func selectorApply(s metav1.LabelSelector) *metav1ac.LabelSelectorApplyConfiguration {
	ac := metav1ac.LabelSelector()
	if len(s.MatchLabels) > 0 {
		ac.WithMatchLabels(s.MatchLabels)
	}
	for _, r := range s.MatchExpressions {
		ac.WithMatchExpressions(metav1ac.LabelSelectorRequirement().WithKey(r.Key).WithOperator(r.Operator).WithValues(r.Values...))
	}
	return ac
}

func clientConfig(cc admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1ac.WebhookClientConfigApplyConfiguration {
	ac := admissionregistrationv1ac.WebhookClientConfig()
	if len(cc.CABundle) > 0 {
		ac.WithCABundle(cc.CABundle...)
	}
	if cc.URL != nil {
		ac.WithURL(*cc.URL)
	}
	if s := cc.Service; s != nil {
		svc := admissionregistrationv1ac.ServiceReference().WithNamespace(s.Namespace).WithName(s.Name)
		if s.Path != nil {
			svc.WithPath(*s.Path)
		}
		if s.Port != nil {
			svc.WithPort(*s.Port)
		}
		ac.WithService(svc)
	}
	return ac
}

func podCreateRule() *admissionregistrationv1ac.RuleWithOperationsApplyConfiguration {
	return admissionregistrationv1ac.RuleWithOperations().
		WithOperations(admissionregistrationv1.Create).
		WithAPIGroups("").WithAPIVersions("v1").WithResources("pods").
		WithScope(admissionregistrationv1.NamespacedScope)
}

// SetupWithManager registers the reconciler: every cluster policy event, and every change of
// the manager's own or the cluster policies' configurations (a rotated CA bundle, an entry
// edited by hand), reconciles the one key.
func (r *ClusterPolicyWebhooksReconciler) SetupWithManager(mgr manager.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{clusterWebhooksKey}
	})
	ours := func(obj client.Object) bool { return obj.GetName() == r.Static || obj.GetName() == r.Configuration }
	return ctrl.ControllerManagedBy(mgr).
		Named("clusterpolicy-webhooks").
		Watches(&gatev1.ClusterHarnessAgentPolicy{}, one).
		Watches(&admissionregistrationv1.MutatingWebhookConfiguration{}, one, ctrl.WithPredicates(predicate.NewPredicateFuncs(ours))).
		Watches(&admissionregistrationv1.ValidatingWebhookConfiguration{}, one, ctrl.WithPredicates(predicate.NewPredicateFuncs(ours))).
		Complete(r)
}
