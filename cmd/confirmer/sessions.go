package main

import (
	"context"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/intutic/gate-operator/internal/confirm"
	"github.com/intutic/gate-operator/internal/confirm/membership"
	"github.com/intutic/gate-operator/internal/confirmerconfig"
)

// watchSessions starts what keeps the sessions answered, in the replication mode the flags
// choose: with --members-lease the replicas share the sessions (this replica's membership and
// its part of the watch); with --leader-elect the watch runs on the Lease holder only;
// otherwise this replica watches every session. The webhook queue answers through the same
// confirmer, so it too keeps to this replica's part.
func watchSessions(ctx context.Context, wg *sync.WaitGroup, o confirmerconfig.Config, c *confirm.Confirmer, kube kubernetes.Interface, log logr.Logger) {
	var watcher *confirm.Watcher
	if len(o.AgentIDs) > 0 {
		watcher = &confirm.Watcher{Confirmer: c, AgentIDs: o.AgentIDs, PollInterval: o.PollInterval, IdleTimeout: o.StreamIdleTimeout,
			MaxStreams: o.MaxStreams, OnReconnect: c.Metrics.Reconnects.Inc}
	}
	switch {
	case o.MembersLease != "":
		wg.Go(func() {
			// Run returns after leaving: this replica dropped itself, its passes ended, and its
			// entry is a tombstone, so the others take its sessions at their next renewal.
			_ = membership.Run(ctx, membership.Options{
				Leases: kube.CoordinationV1(), Namespace: leaseNamespace(o), Name: o.MembersLease, Identity: identity(o),
				OnChange: func(members []string) {
					c.Shard.Set(members)
					c.Metrics.Members.Set(float64(len(members)))
					log.Info("members sharing the sessions", "members", strings.Join(members, ","), "self", identity(o))
				},
				Log: log.WithName("members"),
			})
		})
		if watcher != nil {
			wg.Go(func() { _ = watcher.Run(ctx) })
		}
	case o.LeaderElect && watcher != nil:
		wg.Go(func() {
			leaderLoop(ctx, kube, leaseNamespace(o), o.LeaderElectionID, identity(o), log, func(lctx context.Context) { _ = watcher.Run(lctx) })
		})
	case watcher != nil:
		wg.Go(func() { _ = watcher.Run(ctx) })
	}
}

// leaseNamespace is --leader-election-namespace, else the pod's namespace.
func leaseNamespace(o confirmerconfig.Config) string {
	if o.LeaderElectionNamespace != "" {
		return o.LeaderElectionNamespace
	}
	raw, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	return strings.TrimSpace(string(raw))
}

// identity is --leader-election-identity, else the host name (the pod name).
func identity(o confirmerconfig.Config) string {
	if o.LeaderElectionIdentity != "" {
		return o.LeaderElectionIdentity
	}
	id, _ := os.Hostname()
	return id
}

// leaderLoop runs f while this replica holds the Lease, re-entering the election after a loss.
func leaderLoop(ctx context.Context, kube kubernetes.Interface, ns, lease, id string, log logr.Logger, f func(context.Context)) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: lease, Namespace: ns},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true,
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: f,
				OnStoppedLeading: func() { log.Info("lost the watch lease", "identity", id) },
			},
		})
	}
}
