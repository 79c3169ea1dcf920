package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/egress"
)

// +kubebuilder:rbac:groups=gate.intutic.io,resources=harnessagentpolicies,verbs=list;watch
// +kubebuilder:rbac:groups=gate.intutic.io,resources=harnessagentpolicies/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=list;watch;create;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch

// HarnessAgentPolicyReconciler turns a HarnessAgentPolicy into its bootstrap ConfigMap and
// egress NetworkPolicy. Each reconcile gathers the policy and its children, computes the
// desired children with the pure functions of internal/gate and internal/bootstrap, applies
// what differs with server-side apply, and writes status once.
type HarnessAgentPolicyReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Resolver egress.Resolver
	Clock    clock.PassiveClock

	// DNS selects the cluster DNS pods allow-listed sandboxes may query.
	DNS egress.DNSSelector
	// Canary is the manager's egress canary control port, which every egress policy allows so
	// that egress-wait can prove the policy enforced (cmd/egress-wait). Zero allows none.
	Canary egress.Canary
	// ClusterCIDRs are the cluster's Service and Pod ranges: no allowed host may resolve into
	// them (an allowed CIDR may still cover them). Nil checks none.
	ClusterCIDRs []netip.Prefix
	// Bootstrap are the installation facts the bundle is rendered for.
	Bootstrap bootstrap.Options
	// MinResolve and MaxResolve bound the re-resolution interval of allowed hosts.
	MinResolve, MaxResolve time.Duration
	// ClusterPolicies makes the bundles carry the layers of the ClusterHarnessAgentPolicies
	// selecting their namespace. It needs the cluster-wide RBAC to list them and namespaces, so
	// a manager serving only some namespaces (--namespaces) runs without it (docs/fleet.md).
	ClusterPolicies bool
	// MaxConcurrentReconciles is how many policies are reconciled at once (default 1). Each
	// reconcile waits on up to three API writes and on DNS, so the workers overlap those waits.
	MaxConcurrentReconciles int

	// bundles is each policy's last built bundle.
	bundles bundleMemo
	// layers is each cluster policy's layer, per workspace.
	layers layerMemo
	// mu guards each policy's host resolution, kept between reconciles.
	mu    sync.Mutex
	hosts map[types.NamespacedName]*policyHosts
	// ceilingHosts is the resolution of the ceilings' hosts.
	ceilingHosts ceilingHosts
	// addresses is the sum of the addresses in hosts and ceilingHosts, for the gauge.
	addresses int
}

// Reconcile implements reconcile.Reconciler.
func (r *HarnessAgentPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	policy := &gatev1.HarnessAgentPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, policy); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName) // its children go with it, by owner reference
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !policy.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	// Phases, in order: gather (the children, pods' labels, other NetworkPolicies, and the
	// allowed hosts' addresses, resolved when due), compute (the bundle from the rules,
	// memoised, and the egress: pure), apply. The status is written once, after them, whatever
	// they did: a refused apply is a condition, and a failed read says so.
	var want *desiredState
	var applied policyApplied
	defer func() {
		if serr := r.writeStatus(ctx, policy, want, applied, err); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	observed, err := r.gather(ctx, policy)
	if err != nil {
		return ctrl.Result{}, err
	}
	if want, err = r.compute(policy, observed); err != nil {
		return ctrl.Result{}, err
	}
	applied = r.apply(ctx, policy, observed, want)
	if applied.configMapCurrent {
		// The ConfigMap in the cache holds the bundle: the memo keeps only its hash.
		r.bundles.dropData(req.NamespacedName, want.build)
	}
	if err := applied.err(); err != nil {
		return ctrl.Result{}, err
	}
	if want.resolution != nil {
		// The next resolution waits behind the policies that changed: under load, a new policy
		// should not queue behind thousands of re-resolutions that mostly find nothing new.
		result = ctrl.Result{RequeueAfter: max(want.resolution.Next.Sub(r.Clock.Now()), time.Second), Priority: ptr.To(handler.LowPriority)}
	}
	if !observed.ceilingsNext.IsZero() {
		// A ceiling's hosts are re-resolved by the reconciles of the policies under it.
		if until := max(observed.ceilingsNext.Sub(r.Clock.Now()), time.Second); result.RequeueAfter == 0 || until < result.RequeueAfter {
			result = ctrl.Result{RequeueAfter: until, Priority: ptr.To(handler.LowPriority)}
		}
	}
	if !observed.nextExpiry.IsZero() {
		// The bundle drops an exception just after it expires (the gate stopped honouring it then).
		if until := observed.nextExpiry.Sub(r.Clock.Now()) + time.Second; result.RequeueAfter == 0 || until < result.RequeueAfter {
			result = ctrl.Result{RequeueAfter: max(until, time.Second)}
		}
	}
	return result, nil
}

// forget drops what the reconciler kept for a policy that is gone.
func (r *HarnessAgentPolicyReconciler) forget(key types.NamespacedName) {
	r.bundles.forget(key)
	r.forgetHosts(key)
}

// observedState is what a reconcile reads from the cache.
type observedState struct {
	configMap     *corev1.ConfigMap // nil when absent
	networkPolicy *networkingv1.NetworkPolicy
	others        []networkingv1.NetworkPolicy // other NetworkPolicies in the namespace that may shadow ours
	podLabels     []map[string]string          // labels of the pods in the namespace
	resolution    *egress.Resolution           // the allowed hosts' addresses; nil when it allows none
	layers        bootstrap.Layers             // the cluster policies selecting the namespace, and the active exceptions
	nextExpiry    time.Time                    // when the first exception in layers expires; zero for none
	ceilings      []egress.Ceiling             // the egress ceilings of the cluster policies selecting the namespace
	ceilingsNext  time.Time                    // when the ceilings' hosts are due to be resolved again; zero for none
}

func (r *HarnessAgentPolicyReconciler) gather(ctx context.Context, p *gatev1.HarnessAgentPolicy) (*observedState, error) {
	o := &observedState{}
	// What gather reads is only read, never written: it comes from the cache without a copy.
	cm := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: bootstrap.ConfigMapName(p.Name)}, cm, client.UnsafeDisableDeepCopy); err == nil {
		o.configMap = cm
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading ConfigMap %s: %w", bootstrap.ConfigMapName(p.Name), err)
	}
	np := &networkingv1.NetworkPolicy{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: networkPolicyName(p)}, np, client.UnsafeDisableDeepCopy); err == nil {
		o.networkPolicy = np
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading NetworkPolicy %s: %w", networkPolicyName(p), err)
	}
	// The cluster policies selecting the namespace give the bundle its layers and the
	// NetworkPolicy its ceilings.
	selecting, nsLabels, err := r.selectingClusterPolicies(ctx, p.Namespace)
	if err != nil {
		return nil, err
	}
	if o.layers, o.nextExpiry, err = r.bundleLayers(ctx, p, selecting, nsLabels); err != nil {
		return nil, err
	}
	if o.podLabels, err = r.podLabels(ctx, p.Namespace); err != nil {
		return nil, fmt.Errorf("reading the labels of the pods in namespace %s: %w", p.Namespace, err)
	}
	if o.others, err = r.mayShadow(ctx, p, len(o.podLabels) > 0); err != nil {
		return nil, fmt.Errorf("reading the NetworkPolicies that may shadow %s: %w", networkPolicyName(p), err)
	}
	o.ceilings, o.ceilingsNext = r.ceilings(ctx, selecting)
	o.resolution = r.resolve(ctx, p)
	return o, nil
}

// desiredState is what a reconcile computed.
type desiredState struct {
	// build is the bootstrap bundle to publish, and why (bootstrap.Build).
	build  bootstrap.Result
	egress egress.Egress
	// egressKept is set when the NetworkPolicy in force stays as it is (the rules cannot be
	// published); egress then only describes it.
	egressKept bool
	// resolution is set when the policy allows hosts.
	resolution *egress.Resolution
	shadowing  []string
	// ceilings fingerprints the egress ceilings the NetworkPolicy is rendered within; "" for none.
	ceilings string
}

func (r *HarnessAgentPolicyReconciler) compute(p *gatev1.HarnessAgentPolicy, o *observedState) (*desiredState, error) {
	want := &desiredState{}
	var err error
	if want.build, err = r.buildBundle(p, o); err != nil {
		return nil, err
	}
	r.computeEgress(p, o, want)
	return want, nil
}

func networkPolicyName(p *gatev1.HarnessAgentPolicy) string { return p.Name + "-egress" }

// SetupWithManager registers the controller: it watches policies, owns the bootstrap
// ConfigMaps and egress NetworkPolicies, looks at other NetworkPolicies and at pods' metadata
// to find policies that shadow its egress, and at cluster policies and namespaces' labels for
// the layers a bundle carries.
func (r *HarnessAgentPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
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
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &networkingv1.NetworkPolicy{}, shadowIndex, shadowIndexValue); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&gatev1.HarnessAgentPolicy{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&networkingv1.NetworkPolicy{}, handler.EnqueueRequestsFromMapFunc(r.policiesShadowedBy)).
		WatchesMetadata(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.policiesGoverning), builder.WithPredicates(podLabelsChanged())).
		Watches(&gatev1.GateException{}, handler.EnqueueRequestsFromMapFunc(r.policiesOfExceptionNamespace))
	if r.ClusterPolicies {
		b = b.Watches(&gatev1.ClusterHarnessAgentPolicy{}, handler.EnqueueRequestsFromMapFunc(r.allPolicies), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.policiesOfNamespace), builder.WithPredicates(predicate.LabelChangedPredicate{}))
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Named("harnessagentpolicy").
		Complete(r)
}
