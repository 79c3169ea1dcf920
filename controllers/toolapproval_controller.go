package controllers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// +kubebuilder:rbac:groups=gate.intutic.io,resources=toolapprovals,verbs=list;watch;delete

// ToolApprovalRetention deletes finished ToolApprovals once they are older than Retention: a
// decided, expired or runtime-answered approval is kept that long after its decision time (or,
// without one, its spec.expiresAt) as the record of who decided, then removed. Pending ones are
// never touched; the SessionConfirmer owning them garbage-collects whatever is left.
type ToolApprovalRetention struct {
	Client client.Client
	// Retention is how long a finished approval is kept; it must be positive (the manager runs
	// no retention at all when --tool-approval-retention is 0).
	Retention time.Duration
	// Clock is the clock; nil is the real clock (SetupWithManager sets it).
	Clock clock.PassiveClock
}

// Reconcile implements reconcile.Reconciler: it deletes the approval when its time is up and
// otherwise asks to be called again then.
func (r *ToolApprovalRetention) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ta := &gatev1.ToolApproval{}
	if err := r.Client.Get(ctx, req.NamespacedName, ta); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	deleteAt, ok := RetainedUntil(ta, r.Retention)
	if !ok || ta.DeletionTimestamp != nil {
		return reconcile.Result{}, nil // pending: its state change brings it back here
	}
	if wait := deleteAt.Sub(r.Clock.Now()); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	// Preconditions: an approval recreated under the same name is not deleted for its predecessor.
	err := r.Client.Delete(ctx, ta, client.Preconditions{UID: &ta.UID, ResourceVersion: &ta.ResourceVersion})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return reconcile.Result{}, nil // gone, or changed: the change is queued again
	}
	if err == nil {
		log.FromContext(ctx).V(1).Info("deleted a finished ToolApproval past its retention", "state", ta.Status.State, "retention", r.Retention)
	}
	return reconcile.Result{}, err
}

// RetainedUntil is when a finished approval is deleted: its decision time, else its
// spec.expiresAt, plus retention. ok is false while it is pending.
func RetainedUntil(ta *gatev1.ToolApproval, retention time.Duration) (deleteAt time.Time, ok bool) {
	if !ta.Status.State.Final() {
		return time.Time{}, false
	}
	finished := ta.Spec.ExpiresAt.Time
	if d := ta.Status.Decision; d != nil && d.Time != nil {
		finished = d.Time.Time
	}
	return finished.Add(retention), true
}

// SetupWithManager registers the retention controller.
func (r *ToolApprovalRetention) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&gatev1.ToolApproval{}).
		Named("toolapproval-retention").
		Complete(r)
}
