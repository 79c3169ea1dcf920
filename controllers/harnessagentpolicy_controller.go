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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
	// ClusterCIDRs are the cluster's Service and Pod ranges: no allowed host may resolve into
	// them (an allowed CIDR may still cover them). Nil checks none.
	ClusterCIDRs []netip.Prefix
	// Bootstrap are the installation facts the bundle is rendered for.
	Bootstrap bootstrap.Options
	// MinResolve and MaxResolve bound the re-resolution interval of allowed hosts.
	MinResolve, MaxResolve time.Duration

	// mu guards the state kept between reconciles: each policy's host resolution and its
	// memoised bundle.
	mu     sync.Mutex
	hosts  map[types.NamespacedName]*policyHosts
	builds map[types.NamespacedName]builtBundle
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

	// Phases, in order: gather (the children, other NetworkPolicies, pods' labels), compute
	// (rules, bundle, egress: pure but for host resolution), apply. The status is written once,
	// after them, whatever they did: a refused apply is a condition, and a failed read says so.
	var want *desiredState
	defer func() {
		if serr := r.writeStatus(ctx, policy, want, err); serr != nil {
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
	if err := r.apply(ctx, policy, observed, want); err != nil {
		return ctrl.Result{}, err
	}
	if want.resolution != nil {
		return ctrl.Result{RequeueAfter: max(want.resolution.Next.Sub(r.Clock.Now()), time.Second)}, nil
	}
	return ctrl.Result{}, nil
}

// observedState is what a reconcile reads from the cache.
type observedState struct {
	configMap     *corev1.ConfigMap // nil when absent
	networkPolicy *networkingv1.NetworkPolicy
	others        []networkingv1.NetworkPolicy // other NetworkPolicies in the namespace
	podLabels     []map[string]string          // labels of the pods in the namespace
	resolution    *egress.Resolution           // the allowed hosts' addresses; nil when it allows none
}

func (r *HarnessAgentPolicyReconciler) gather(ctx context.Context, p *gatev1.HarnessAgentPolicy) (*observedState, error) {
	o := &observedState{}
	cm := &corev1.ConfigMap{}
	if found, err := getOptional(ctx, r.Client, types.NamespacedName{Namespace: p.Namespace, Name: configMapName(p)}, cm); err != nil {
		return nil, err
	} else if found {
		o.configMap = cm
	}
	var nps networkingv1.NetworkPolicyList
	if err := r.Client.List(ctx, &nps, client.InNamespace(p.Namespace)); err != nil {
		return nil, err
	}
	for i := range nps.Items {
		if nps.Items[i].Name == networkPolicyName(p) {
			o.networkPolicy = &nps.Items[i]
		} else {
			o.others = append(o.others, nps.Items[i])
		}
	}
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := r.Client.List(ctx, pods, client.InNamespace(p.Namespace)); err != nil {
		return nil, err
	}
	for _, pod := range pods.Items {
		o.podLabels = append(o.podLabels, pod.Labels)
	}
	o.resolution = r.resolve(ctx, p)
	return o, nil
}

// desiredState is what a reconcile computed.
type desiredState struct {
	// build is the bootstrap bundle to publish, and why (bootstrap.Build).
	build bootstrap.Result
	// configMapErr and networkPolicyErr are the API server's refusals of the applies.
	configMapErr, networkPolicyErr error
	egress                         egress.Egress
	// egressKept is set when the NetworkPolicy in force stays as it is (the rules cannot be
	// published); egress then only describes it.
	egressKept bool
	// resolution is set when the policy allows hosts.
	resolution *egress.Resolution
	shadowing  []string
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

// buildBundle is bootstrap.Build, memoised: the rules compile once per generation of the
// policy (and, while they cannot be published, once per state of the bundle in force), not on
// every reconcile that pods or other NetworkPolicies cause.
func (r *HarnessAgentPolicyReconciler) buildBundle(p *gatev1.HarnessAgentPolicy, o *observedState) (bootstrap.Result, error) {
	published := bootstrap.Published{SnapshotDigest: p.Status.SnapshotDigest, BootstrapHash: p.Status.BootstrapHash}
	publishedVersion := ""
	if cm := o.configMap; cm != nil && ownedBy(cm, p) {
		published.Data, publishedVersion = cm.Data, cm.ResourceVersion
	}
	key := buildKey{uid: p.UID, generation: p.Generation, digest: published.SnapshotDigest, hash: published.BootstrapHash, configMapVersion: publishedVersion}
	r.mu.Lock()
	memo, ok := r.builds[client.ObjectKeyFromObject(p)]
	r.mu.Unlock()
	// A result that publishes the spec depends on the spec alone; one held back depends on the
	// bundle in force too.
	if ok && memo.key.uid == key.uid && memo.key.generation == key.generation && (!memo.result.HeldBack() || memo.key == key) {
		return memo.result, nil
	}
	res, err := bootstrap.Build(p, published, r.Bootstrap)
	if err != nil {
		return bootstrap.Result{}, err
	}
	snapshotBuilds.Inc()
	r.mu.Lock()
	if r.builds == nil {
		r.builds = map[types.NamespacedName]builtBundle{}
	}
	r.builds[client.ObjectKeyFromObject(p)] = builtBundle{key: key, result: res}
	r.mu.Unlock()
	return res, nil
}

// buildKey is what a memoised bootstrap.Result depends on.
type buildKey struct {
	uid                            types.UID
	generation                     int64
	digest, hash, configMapVersion string
}

type builtBundle struct {
	key    buildKey
	result bootstrap.Result
}

func configMapName(p *gatev1.HarnessAgentPolicy) string     { return p.Name + "-bootstrap" }
func networkPolicyName(p *gatev1.HarnessAgentPolicy) string { return p.Name + "-egress" }

// SetupWithManager registers the controller: it watches policies, owns the bootstrap
// ConfigMaps and egress NetworkPolicies, and looks at other NetworkPolicies and at pods'
// metadata to find policies that shadow its egress.
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
	allInNamespace := handler.EnqueueRequestsFromMapFunc(r.policiesInNamespace)
	return ctrl.NewControllerManagedBy(mgr).
		For(&gatev1.HarnessAgentPolicy{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&networkingv1.NetworkPolicy{}, allInNamespace).
		WatchesMetadata(&corev1.Pod{}, allInNamespace, builder.WithPredicates(podLabelsChanged())).
		Named("harnessagentpolicy").
		Complete(r)
}

// policiesInNamespace enqueues every policy in the namespace of obj: a NetworkPolicy or a pod
// there may change which policies are shadowed.
func (r *HarnessAgentPolicyReconciler) policiesInNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	var list gatev1.HarnessAgentPolicyList
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "listing policies to re-check shadowing", "namespace", obj.GetNamespace())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	return reqs
}
