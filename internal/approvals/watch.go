package approvals

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// NewCache is the cache of one SessionConfirmer's ToolApprovals: its namespace, its
// label, and no other kind (cache only what you own).
func NewCache(cfg *rest.Config, scheme *runtime.Scheme, namespace, confirmer string) (cache.Cache, error) {
	return cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&gatev1.ToolApproval{}: {Label: labels.SelectorFromSet(labels.Set{gatev1.LabelConfirmer: confirmer})},
		},
	})
}

// Watch acts on the changes of the ToolApprovals of one SessionConfirmer: a Managed Agents
// approval that was answered reaches its session (Answerer.AnswerApproval, on the replica
// owning the session), and an approval of the HTTP surfaces that nobody answered is
// marked Expired at its deadline (by the replica the Shard gives its name). Every change of an
// approval queues its name; a name queued twice is handled once, and each pass reads the
// approval as the cache has it then.
type Watch struct {
	Approvals *Store
	// Confirmer answers Managed Agents calls; nil when this confirmer watches no sessions.
	Confirmer Answerer
	// Shard, when set, is this replica's part; nil owns everything.
	Shard Shard
	// Workers handle approvals in parallel (4 when zero).
	Workers int
}

// Answerer sends the answer of a Managed Agents approval to its session (confirm.Confirmer)
// and says how long until the approval should be looked at again, zero when never.
type Answerer interface {
	AnswerApproval(ctx context.Context, ta *gatev1.ToolApproval) (time.Duration, error)
}

// Shard is this replica's part of the work when replicas share it (confirm.Shard): Acquire
// starts the work on a key this replica owns, and release ends it; owned is false, and
// nothing starts, for a key of another replica.
type Shard interface {
	Acquire(key string) (release func(), owned bool)
}

// maxApprovalRetries bounds the retries of an approval whose pass keeps failing; the
// deadline pass of its session and the next change of the approval still act on it.
const maxApprovalRetries = 10

// Run feeds the informer's changes to the workers until ctx ends. informer is the cache's
// informer of ToolApprovals; the cache must be started (and synced, so a restart sees every
// approval) by the caller.
func (w *Watch) Run(ctx context.Context, informer cache.Informer) error {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "toolapprovals"})
	enqueue := func(obj any) {
		if ta, ok := obj.(*gatev1.ToolApproval); ok && w.wanted(ta) {
			q.Add(ta.Name)
		}
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	if err != nil {
		q.ShutDown()
		return fmt.Errorf("watching ToolApprovals: %w", err)
	}
	n := w.Workers
	if n <= 0 {
		n = 4
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for w.next(ctx, q) {
			}
		})
	}
	<-ctx.Done()
	_ = informer.RemoveEventHandler(reg)
	q.ShutDown()
	wg.Wait()
	return nil
}

// wanted filters the changes: every Pending approval, and an answered one while its call may
// still wait for that answer. Answered approvals older than their deadline (a restart lists
// them all) are left to the sessions' own passes, which answer every call still pending.
func (w *Watch) wanted(ta *gatev1.ToolApproval) bool {
	if !ta.Status.State.Final() {
		return true
	}
	// AnsweredInRuntime: the runtime answered the call itself, nothing here waits for it.
	return answers[ta.Status.State] != AnsweredInRuntime && ta.Spec.Surface == gatev1.SurfaceManagedAgents &&
		w.Approvals.Now().Before(ta.Spec.ExpiresAt.Add(time.Minute))
}

func (w *Watch) next(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) bool {
	name, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(name)
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute) // a pass ends even when ctx does
	again, err := w.handle(actx, name)
	cancel()
	switch {
	case err != nil && q.NumRequeues(name) < maxApprovalRetries:
		w.Approvals.Log.Error(err, "acting on a ToolApproval; retrying", "approval", name)
		q.AddRateLimited(name)
	case err != nil:
		w.Approvals.Log.Error(err, "acting on a ToolApproval; giving up until it changes", "approval", name)
		q.Forget(name)
	case again > 0:
		q.Forget(name)
		q.AddAfter(name, again)
	default:
		q.Forget(name)
	}
	return true
}

// handle acts on one approval as the cache has it now, and says when to look again.
func (w *Watch) handle(ctx context.Context, name string) (time.Duration, error) {
	a := w.Approvals
	ta, err := a.Get(ctx, name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !a.TrustedObject(ta) {
		return 0, nil // not this confirmer's to act on or write
	}
	if ta.Spec.Surface == gatev1.SurfaceManagedAgents {
		if w.Confirmer == nil {
			return 0, nil
		}
		return w.Confirmer.AnswerApproval(ctx, ta)
	}
	return w.expireHTTP(ctx, ta)
}

// expireHTTP marks an approval of the HTTP surfaces Expired at its deadline; nothing is sent
// anywhere (the caller polls GET /v1/approvals/{name}). Until then it says when to look again.
// When replicas share the work, the one the Shard gives the approval's name writes it; the
// others look again later, in case it moves to them.
func (w *Watch) expireHTTP(ctx context.Context, ta *gatev1.ToolApproval) (time.Duration, error) {
	a := w.Approvals
	if ta.Status.State.Final() {
		return 0, nil
	}
	if wait := ta.Spec.ExpiresAt.Sub(a.Now()); wait > 0 {
		return wait, nil
	}
	release, owned := func() {}, true
	if w.Shard != nil {
		release, owned = w.Shard.Acquire(ta.Name)
	}
	if !owned {
		return 30 * time.Second, nil
	}
	defer release()
	fresh, err := a.Expire(ctx, ta)
	switch {
	case err == ErrSettled:
		return 0, nil
	case err != nil:
		// Refused (the API server's clock, which measures the deadline, has not reached it yet)
		// or failed: the caller reads Pending until Expired is recorded; look again soon.
		a.Log.Error(err, "recording Expired; retrying", "approval", ta.Name)
		return 5 * time.Second, nil
	}
	a.Outcome(fresh, EventExpired, fmt.Sprintf("no human answered within %s; the %s caller reads Expired", a.Deadline, ta.Spec.Surface))
	return 0, nil
}
