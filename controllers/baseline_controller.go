package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/egress"
)

// A namespace that no cluster policy selects any more loses its baseline. Owner references
// would delete the children only once the last cluster policy is gone, so the reconciler
// deletes them itself, and may delete nothing but these two names.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=delete,resourceNames=gate-baseline-bootstrap
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=delete,resourceNames=gate-baseline-egress

// BaselineNetworkPolicy is the egress NetworkPolicy of a namespace's baseline: it selects the
// pods labelled gatev1.LabelBaseline, which mount the baseline bundle (bootstrap.BaselineConfigMap).
const BaselineNetworkPolicy = "gate-baseline-egress"

// BaselineReconciler publishes, in every namespace that a ClusterHarnessAgentPolicy selects,
// the baseline that the pods no namespace policy governs run under: the bundle of the cluster
// layers alone (bootstrap.BaselineConfigMap) and an egress NetworkPolicy within every egress
// ceiling selecting the namespace (BaselineNetworkPolicy; no ceiling denies all egress). It is
// keyed by namespace: a reconcile gathers the cluster policies selecting the namespace, its
// exceptions and the ceilings' hosts, renders both children with the pure functions of
// internal/bootstrap and internal/egress, and applies what differs. Both children are owned by
// every cluster policy selecting the namespace, and are deleted when none does.
type BaselineReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Resolver egress.Resolver
	Clock    clock.PassiveClock

	// DNS selects the cluster DNS pods that pods under an allow-list ceiling may query.
	DNS egress.DNSSelector
	// Canary is the manager's egress canary control port, which the NetworkPolicy always allows:
	// the injected pods run egress-wait, which needs it.
	Canary egress.Canary
	// ClusterCIDRs are the cluster's Service and Pod ranges, which no ceiling host may resolve into.
	ClusterCIDRs []netip.Prefix
	// Bootstrap are the installation facts the bundle is rendered for.
	Bootstrap bootstrap.Options
	// MinResolve and MaxResolve bound the re-resolution interval of the ceilings' hosts.
	MinResolve, MaxResolve time.Duration
	// ManagerNamespace is the manager's own namespace, which gets no baseline, as the system
	// namespaces get none (baselineNamespace).
	ManagerNamespace string
	// MaxConcurrentReconciles is how many namespaces are reconciled at once (default 1).
	MaxConcurrentReconciles int

	// layers is each cluster policy's layer for workspace "".
	layers layerMemo
	// ceilingHosts is the resolution of the ceilings' hosts.
	ceilingHosts ceilingHosts
}

// baselineNamespace reports whether a namespace can have a baseline: any but the system
// namespaces and the manager's own.
func baselineNamespace(name, managerNamespace string) bool {
	return name != managerNamespace && !slices.Contains(gatev1.SystemNamespaces, name)
}

// Reconcile implements reconcile.Reconciler; req.Name is a namespace.
func (r *BaselineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	o, err := r.gather(ctx, req.Name)
	if err != nil || o == nil {
		return ctrl.Result{}, err
	}
	if len(o.selecting) == 0 {
		return ctrl.Result{}, r.remove(ctx, o)
	}
	want, err := r.compute(req.Name, o)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.apply(ctx, req.Name, o, want); err != nil {
		return ctrl.Result{}, err
	}
	var after time.Duration
	now := r.Clock.Now()
	if !o.ceilingsNext.IsZero() {
		after = max(o.ceilingsNext.Sub(now), time.Second)
	}
	if !o.nextExpiry.IsZero() {
		// The bundle drops an exception just after it expires (the gate stopped honouring it then).
		if until := max(o.nextExpiry.Sub(now)+time.Second, time.Second); after == 0 || until < after {
			after = until
		}
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// baselineObserved is what a reconcile reads.
type baselineObserved struct {
	configMap     *corev1.ConfigMap // nil when absent
	networkPolicy *networkingv1.NetworkPolicy
	// selecting are the cluster policies selecting the namespace, by name; none when it gets no
	// baseline.
	selecting  []*gatev1.ClusterHarnessAgentPolicy
	layers     []bootstrap.ClusterLayer // their layers, in report order, with the namespace's exceptions
	nextExpiry time.Time                // when the first of those exceptions expires; zero for none
	// ceilings are the egress ceilings among them, by name, their hosts resolved.
	ceilings     []egress.Ceiling
	ceilingsNext time.Time // when the ceilings' hosts are due to be resolved again; zero for none
}

// gather reads the namespace, its children and the cluster policies selecting it. It returns
// nil for a namespace that is gone or going: its children go with it.
func (r *BaselineReconciler) gather(ctx context.Context, namespace string) (*baselineObserved, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Client.Get(ctx, types.NamespacedName{Name: namespace}, ns, client.UnsafeDisableDeepCopy); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	if !ns.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	o := &baselineObserved{}
	if err := r.gatherChildren(ctx, namespace, o); err != nil {
		return nil, err
	}
	var list gatev1.ClusterHarnessAgentPolicyList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ClusterHarnessAgentPolicies: %w", err)
	}
	r.layers.keepOnly(list.Items)
	r.ceilingHosts.keepOnly(list.Items)
	if !baselineNamespace(namespace, r.ManagerNamespace) {
		return o, nil
	}
	for i := range list.Items {
		if c := &list.Items[i]; c.DeletionTimestamp.IsZero() && selectsNamespace(c, ns.Labels) {
			o.selecting = append(o.selecting, c)
		}
	}
	if len(o.selecting) == 0 {
		return o, nil
	}
	slices.SortFunc(o.selecting, func(a, b *gatev1.ClusterHarnessAgentPolicy) int { return strings.Compare(a.Name, b.Name) })
	return o, r.gatherLayers(ctx, namespace, ns.Labels, o)
}

// gatherChildren reads the namespace's baseline children from the cache into o.
func (r *BaselineReconciler) gatherChildren(ctx context.Context, namespace string, o *baselineObserved) error {
	// What gather reads is only read, never written: it comes from the cache without a copy.
	cm := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: bootstrap.BaselineConfigMap}, cm, client.UnsafeDisableDeepCopy); err == nil {
		o.configMap = cm
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading ConfigMap %s: %w", bootstrap.BaselineConfigMap, err)
	}
	np := &networkingv1.NetworkPolicy{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: BaselineNetworkPolicy}, np, client.UnsafeDisableDeepCopy); err == nil {
		o.networkPolicy = np
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading NetworkPolicy %s: %w", BaselineNetworkPolicy, err)
	}
	return nil
}

// gatherLayers builds the layers of the cluster policies selecting the namespace, with the
// namespace's active exceptions of their rules, and resolves their ceilings' hosts when due.
func (r *BaselineReconciler) gatherLayers(ctx context.Context, namespace string, nsLabels map[string]string, o *baselineObserved) error {
	var exceptions gatev1.GateExceptionList
	if err := r.Client.List(ctx, &exceptions, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing GateExceptions: %w", err)
	}
	j := &exceptionJudge{now: r.Clock.Now(), items: exceptions.Items}
	for _, c := range o.selecting {
		l, err := r.layers.layer(c, "")
		if err != nil {
			// Never published without it: the cluster policy's RulesCompiled says why.
			return fmt.Errorf("building the layer of ClusterHarnessAgentPolicy %s: %w", c.Name, err)
		}
		// The memoised layer is shared by every namespace; its exceptions are this one's.
		if l.Exceptions, err = j.active(gatev1.ExceptionOfClusterPolicy, c.Name, bootstrap.ExceptionTarget{Cluster: c, NamespaceLabels: nsLabels}); err != nil {
			return err
		}
		o.layers = append(o.layers, l)
		if c.Spec.Egress != nil {
			ceiling, due, _ := r.ceilingHosts.ceiling(ctx, c, r.Resolver, r.Clock.Now(), r.MinResolve, r.MaxResolve)
			o.ceilingsNext = earlier(o.ceilingsNext, due)
			o.ceilings = append(o.ceilings, ceiling)
		}
	}
	bootstrap.SortClusterLayers(o.layers)
	o.nextExpiry = j.next
	return nil
}

// baselineDesired is what a reconcile computed.
type baselineDesired struct {
	bundle bootstrap.Bundle
	// tooLarge is set when the layers do not fit in one ConfigMap: bundle then blocks every call.
	tooLarge error
	egress   egress.Egress
	// ceilings fingerprints the ceilings the NetworkPolicy is rendered within; "" for none.
	ceilings string
}

// compute renders the bundle and the NetworkPolicy. Layers that do not fit in one ConfigMap
// make a bundle that blocks every call: a namespace never runs without its baseline.
func (r *BaselineReconciler) compute(namespace string, o *baselineObserved) (*baselineDesired, error) {
	want := &baselineDesired{ceilings: ceilingsFingerprint(o.ceilings)}
	specs := make([]*gatev1.EgressSpec, 0, len(o.ceilings))
	for _, c := range o.ceilings {
		specs = append(specs, c.Spec)
	}
	var err error
	want.bundle, err = bootstrap.RenderBaseline(bootstrap.Layers{Cluster: o.layers}, namespace, specs, r.Bootstrap)
	if tooLarge := (*bootstrap.TooLargeError)(nil); errors.As(err, &tooLarge) {
		want.tooLarge = err
		want.bundle, err = bootstrap.RenderBaselineBlocking(namespace, err.Error(), r.Bootstrap)
	}
	if err != nil {
		return nil, err
	}
	want.egress = baselineEgress(o.ceilings, r.DNS, r.Canary, r.ClusterCIDRs)
	return want, nil
}

// SetupWithManager registers the controller. Its requests name a namespace: the namespace's
// label changes, every namespace a cluster policy selects before and after its change, an
// exception's namespace and a baseline child's namespace enqueue one.
func (r *BaselineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.DNS.Namespace == "" {
		r.DNS = egress.DefaultDNSSelector
	}
	if r.MinResolve == 0 {
		r.MinResolve = egress.DefaultMinResolveInterval
	}
	if r.MaxResolve == 0 {
		r.MaxResolve = egress.DefaultMaxResolveInterval
	}
	if r.MinResolve > r.MaxResolve {
		return fmt.Errorf("the resolve floor %s is above the cap %s", r.MinResolve, r.MaxResolve)
	}
	children := builder.WithPredicates(predicate.NewPredicateFuncs(isBaselineChild))
	return ctrl.NewControllerManagedBy(mgr).
		Named("baseline").
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(namespaceOf(func(o client.Object) string { return o.GetName() })),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&gatev1.ClusterHarnessAgentPolicy{}, handler.EnqueueRequestsFromMapFunc(r.namespacesSelectedBy), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&gatev1.GateException{}, handler.EnqueueRequestsFromMapFunc(namespaceOf(client.Object.GetNamespace))).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(namespaceOf(client.Object.GetNamespace)), children).
		Watches(&networkingv1.NetworkPolicy{}, handler.EnqueueRequestsFromMapFunc(namespaceOf(client.Object.GetNamespace)), children).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Complete(r)
}

// namespaceOf maps an object to the request of the namespace name gives for it.
func namespaceOf(name func(client.Object) string) handler.MapFunc {
	return func(_ context.Context, obj client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name(obj)}}}
	}
}

// namespacesSelectedBy enqueues the namespaces a cluster policy's namespaceSelector selects;
// an update maps the old policy and the new one, so the namespaces it stops selecting are
// enqueued too. A selector that cannot be evaluated enqueues every namespace: it selects none,
// and the namespaces it selected before must learn so.
func (r *BaselineReconciler) namespacesSelectedBy(ctx context.Context, obj client.Object) []reconcile.Request {
	c, ok := obj.(*gatev1.ClusterHarnessAgentPolicy)
	if !ok {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector)
	if err != nil {
		sel = labels.Everything()
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := r.Client.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing namespaces for a ClusterHarnessAgentPolicy's change", "clusterPolicy", c.Name)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		if name := list.Items[i].Name; baselineNamespace(name, r.ManagerNamespace) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		}
	}
	return reqs
}
