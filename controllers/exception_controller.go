package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
)

// +kubebuilder:rbac:groups=gate.intutic.io,resources=gateexceptions,verbs=list;watch
// +kubebuilder:rbac:groups=gate.intutic.io,resources=gateexceptions/status,verbs=patch

// GateExceptionReconciler reports each exception's phase (Active, Expired, Refused, by
// bootstrap.JudgeException, the judgement the bundles are built with) and who requested it. It
// requeues an active exception at its expiresAt, so it is marked Expired then; the object is
// never deleted, since GitOps owns its spec. The gate stops honouring it at expiresAt by its own
// clock whether or not this runs.
type GateExceptionReconciler struct {
	Client client.Client
	Clock  clock.PassiveClock
	// ClusterPolicies is whether cluster policies are read (HarnessAgentPolicyReconciler's):
	// without, an exception of one is Refused as naming no policy the manager serves.
	ClusterPolicies bool
}

// Reconcile implements reconcile.Reconciler.
func (r *GateExceptionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	gex := &gatev1.GateException{}
	if err := r.Client.Get(ctx, req.NamespacedName, gex); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	target, err := exceptionTarget(ctx, r.Client, gex, r.ClusterPolicies)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.Clock.Now()
	phase, msg := bootstrap.JudgeException(gex, target, now)
	next := gex.Status.DeepCopy()
	next.ObservedGeneration, next.Phase, next.Message = gex.Generation, phase, msg
	next.RequestedBy = gex.Annotations[gatev1.AnnotationRequestedBy]
	if err := patchStatus(ctx, r.Client, gex, &gex.Status, next); err != nil {
		return ctrl.Result{}, err
	}
	if phase == gatev1.ExceptionActive {
		// A second past expiresAt, so the judgement then is Expired.
		return ctrl.Result{RequeueAfter: gex.Spec.ExpiresAt.Sub(now) + time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// exceptionTarget reads the policy an exception names and its namespace's labels, from the
// cache. A cluster policy is not looked for when cluster policies are not read.
func exceptionTarget(ctx context.Context, c client.Reader, gex *gatev1.GateException, clusterPolicies bool) (bootstrap.ExceptionTarget, error) {
	var t bootstrap.ExceptionTarget
	switch gex.Spec.PolicyRef.Kind {
	case gatev1.ExceptionOfClusterPolicy:
		if !clusterPolicies {
			return t, nil
		}
		labels, err := namespaceLabels(ctx, c, gex.Namespace)
		if err != nil {
			return t, err
		}
		t.NamespaceLabels = labels
		cp := &gatev1.ClusterHarnessAgentPolicy{}
		switch err := c.Get(ctx, types.NamespacedName{Name: gex.Spec.PolicyRef.Name}, cp); {
		case err == nil:
			t.Cluster = cp
		case !apierrors.IsNotFound(err):
			return t, fmt.Errorf("reading ClusterHarnessAgentPolicy %s: %w", gex.Spec.PolicyRef.Name, err)
		}
	default:
		p := &gatev1.HarnessAgentPolicy{}
		switch err := c.Get(ctx, types.NamespacedName{Namespace: gex.Namespace, Name: gex.Spec.PolicyRef.Name}, p); {
		case err == nil:
			t.Namespace = p
		case !apierrors.IsNotFound(err):
			return t, fmt.Errorf("reading HarnessAgentPolicy %s/%s: %w", gex.Namespace, gex.Spec.PolicyRef.Name, err)
		}
	}
	return t, nil
}

// exceptionsIn enqueues the exceptions of a namespace ("" for every namespace).
func (r *GateExceptionReconciler) exceptionsIn(ctx context.Context, namespace string) []reconcile.Request {
	var list gatev1.GateExceptionList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing GateExceptions to judge them again")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}})
	}
	return reqs
}

// SetupWithManager registers the controller: exceptions, and the policies they may name
// (a cluster policy's change judges every exception again, a namespace policy's those of its
// namespace).
func (r *GateExceptionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	changed := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	ofItsNamespace := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.exceptionsIn(ctx, o.GetNamespace())
	})
	b := ctrl.NewControllerManagedBy(mgr).
		For(&gatev1.GateException{}).
		Watches(&gatev1.HarnessAgentPolicy{}, ofItsNamespace, changed)
	if r.ClusterPolicies {
		// A cluster policy's change may judge any exception again; a namespace's labels, those
		// of its namespace (a cluster policy's exceptions.namespaceSelector).
		b = b.Watches(&gatev1.ClusterHarnessAgentPolicy{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request { return r.exceptionsIn(ctx, "") }), changed).
			WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.exceptionsIn(ctx, o.GetName())
			}),
				builder.WithPredicates(predicate.LabelChangedPredicate{}))
	}
	return b.Named("gateexception").Complete(r)
}
