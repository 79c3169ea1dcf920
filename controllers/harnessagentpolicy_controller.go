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
	"github.com/intutic/gate-operator/internal/gate"
)

// +kubebuilder:rbac:groups=gate.intutic.io,resources=harnessagentpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=gate.intutic.io,resources=harnessagentpolicies/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// HarnessAgentPolicyReconciler turns a HarnessAgentPolicy into its bootstrap ConfigMap and
// egress NetworkPolicy. Each reconcile gathers the policy and its children, computes the
// desired children with the pure functions of internal/gate and internal/bootstrap, applies
// what differs with server-side apply, and writes status once.
type HarnessAgentPolicyReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Resolver bootstrap.Resolver
	Clock    clock.PassiveClock

	// DNS selects the cluster DNS pods allow-listed sandboxes may query.
	DNS bootstrap.DNSSelector
	// ClusterCIDRs are the cluster's Service and Pod ranges: no allowed host may resolve into
	// them (an allowed CIDR may still cover them). Nil checks none.
	ClusterCIDRs []netip.Prefix
	// Bootstrap are the installation facts the bundle is rendered for.
	Bootstrap bootstrap.Options
	// MinResolve and MaxResolve bound the re-resolution interval of allowed hosts.
	MinResolve, MaxResolve time.Duration

	mu    sync.Mutex
	hosts map[types.NamespacedName]*policyHosts
}

// Reconcile implements reconcile.Reconciler.
func (r *HarnessAgentPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	defer func() { observeReconcile(err) }()
	policy := &gatev1.HarnessAgentPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, policy); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetHosts(req.NamespacedName) // its children go with it, by owner reference
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !policy.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	observed, err := r.gather(ctx, policy)
	if err != nil {
		return ctrl.Result{}, err
	}
	want, err := r.compute(ctx, policy, observed)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The status is written whatever the applies did: a refused apply is a condition.
	applyErr := r.apply(ctx, policy, observed, want)
	if err := r.writeStatus(ctx, policy, observed, want); err != nil {
		return ctrl.Result{}, errors.Join(applyErr, err)
	}
	if applyErr != nil {
		return ctrl.Result{}, applyErr
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
}

func (r *HarnessAgentPolicyReconciler) gather(ctx context.Context, p *gatev1.HarnessAgentPolicy) (*observedState, error) {
	o := &observedState{}
	cm := &corev1.ConfigMap{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: configMapName(p)}, cm); {
	case err == nil:
		o.configMap = cm
	case !apierrors.IsNotFound(err):
		return nil, err
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
	return o, nil
}

// desiredState is what a reconcile computed.
type desiredState struct {
	// compileErrs are the rules' problems; empty when they compiled.
	compileErrs gate.FieldErrors
	// bundle is the ConfigMap data to publish.
	bundle *bootstrap.Bundle
	// renderErr is set when the rules compiled but their bundle cannot be published.
	renderErr error
	// kept is set when bundle is the last good one, re-rendered (see holdBack).
	kept bool
	// configMapErr and networkPolicyErr are the API server's refusals of the applies.
	configMapErr, networkPolicyErr error
	// snapshot is the snapshot published (or kept); ruleCount its rules.
	snapshot *gate.Snapshot
	egress   bootstrap.Egress
	// egressKept is set when the NetworkPolicy in force stays as it is (the rules do not
	// compile); egress then only describes it.
	egressKept bool
	// resolution is set when the policy allows hosts.
	resolution *bootstrap.Resolution
	shadowing  []string
}

func (r *HarnessAgentPolicyReconciler) compute(ctx context.Context, p *gatev1.HarnessAgentPolicy, o *observedState) (*desiredState, error) {
	want := &desiredState{}
	meta, rules := bootstrap.SnapshotSource(p)
	snap, err := gate.BuildSnapshot(meta, rules)
	var errs gate.FieldErrors
	switch {
	case errors.As(err, &errs):
		want.compileErrs = errs
	case err != nil:
		return nil, err
	default:
		data, err := snap.Encode()
		if err != nil {
			return nil, err
		}
		b, err := bootstrap.Render(&p.Spec, data, r.Bootstrap)
		var tooLarge *bootstrap.TooLargeError
		switch {
		case errors.As(err, &tooLarge):
			want.renderErr = err
		case err != nil:
			return nil, err
		default:
			want.bundle, want.snapshot = &b, snap
		}
	}
	if want.heldBack() {
		if err := r.holdBack(p, o, meta, want); err != nil {
			return nil, err
		}
	}

	r.computeEgress(ctx, p, o, want)
	return want, nil
}

// heldBack reports whether the spec's rules cannot be published: they do not compile, or
// their bundle would not fit in a ConfigMap.
func (d *desiredState) heldBack() bool { return len(d.compileErrs) > 0 || d.renderErr != nil }

// holdBack chooses what sandboxes get while the spec's rules cannot be published: the bundle
// this controller last published for the policy, re-rendered around its snapshot, or else one
// that blocks every call. Nothing an update that cannot be published asks for reaches them.
func (r *HarnessAgentPolicyReconciler) holdBack(p *gatev1.HarnessAgentPolicy, o *observedState, meta gate.PolicyMeta, want *desiredState) error {
	if last := r.lastGood(p, o.configMap); last != nil {
		b, err := bootstrap.Keep(o.configMap.Data, p.Spec.WorkspaceID, r.Bootstrap)
		if err != nil {
			return err
		}
		want.bundle, want.snapshot, want.kept = &b, last, true
		return nil
	}
	reason := want.renderErr
	if reason == nil {
		reason = want.compileErrs
	}
	snap, err := gate.BuildInvalidSnapshot(meta, reason.Error())
	if err != nil {
		return err
	}
	data, err := snap.Encode()
	if err != nil {
		return err
	}
	b, err := bootstrap.RenderBlocking(p.Spec.WorkspaceID, data, r.Bootstrap)
	if err != nil {
		return err
	}
	want.bundle, want.snapshot = &b, snap
	return nil
}

// lastGood returns the snapshot of the policy's ConfigMap when the ConfigMap is, unedited, the
// bundle this controller published for this policy: owned by it, its files matching its
// bootstrap hash, that hash and the snapshot's digest the ones the status recorded when it
// was published, the snapshot sealed for this policy and workspace at a generation it has had.
// Anything else (edited by hand, resealed, another policy's or workspace's) is not kept.
func (r *HarnessAgentPolicyReconciler) lastGood(p *gatev1.HarnessAgentPolicy, cm *corev1.ConfigMap) *gate.Snapshot {
	if cm == nil || !ownedBy(cm, p) || p.Status.SnapshotDigest == "" || p.Status.BootstrapHash == "" ||
		cm.Data[bootstrap.KeyBootstrapHash] != p.Status.BootstrapHash || !bootstrap.Verify(cm.Data, p.Spec.WorkspaceID, r.Bootstrap) {
		return nil
	}
	s, err := gate.LoadSnapshot([]byte(cm.Data[bootstrap.KeySnapshot]), "")
	if err != nil || s.Invalid != "" || s.Digest != p.Status.SnapshotDigest || s.Policy != p.Namespace+"/"+p.Name ||
		s.WorkspaceID != p.Spec.WorkspaceID || s.Generation > p.Generation {
		return nil
	}
	return s
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
		r.DNS = bootstrap.DefaultDNSSelector
	}
	if r.MinResolve == 0 {
		r.MinResolve = bootstrap.DefaultMinResolveInterval
	}
	if r.MaxResolve == 0 {
		r.MaxResolve = bootstrap.DefaultMaxResolveInterval
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
