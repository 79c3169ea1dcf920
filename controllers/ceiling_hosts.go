package controllers

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/egress"
)

// ceilingHosts keeps the resolution of each cluster policy's ceiling hosts between reconciles,
// by the policy's name: every namespace a ceiling bounds shares one resolution, resolved by
// whichever reconcile finds it due.
type ceilingHosts struct {
	mu    sync.Mutex
	hosts map[string]*policyHosts
}

// ceiling returns the cluster policy's egress ceiling (it has one) with its hosts resolved when
// they are due (at the records' TTL, within the floor and the cap) or changed; when they are due
// again (zero when it lists none); and by how many the addresses kept for it changed.
func (h *ceilingHosts) ceiling(ctx context.Context, c *gatev1.ClusterHarnessAgentPolicy, resolver egress.Resolver, now time.Time, minResolve, maxResolve time.Duration) (ceiling egress.Ceiling, next time.Time, delta int) {
	ceiling = egress.Ceiling{Policy: c.Name, Spec: c.Spec.Egress}
	hosts := sortedHosts(c.Spec.Egress.AllowedHosts)
	if len(hosts) == 0 {
		return ceiling, time.Time{}, 0
	}
	h.mu.Lock()
	if h.hosts == nil {
		h.hosts = map[string]*policyHosts{}
	}
	st := h.hosts[c.Name]
	if st == nil {
		st = &policyHosts{}
		h.hosts[c.Name] = st
	}
	h.mu.Unlock()
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("clusterPolicy", c.Name))
	res, before := st.resolve(ctx, resolver, hosts, now, minResolve, maxResolve)
	ceiling.HostAddrs = res.Hosts
	return ceiling, res.Next, len(res.Addresses) - before
}

// keepOnly drops the resolution state of ceilings whose cluster policy is gone or lists no
// hosts any more, and returns how many addresses went with them.
func (h *ceilingHosts) keepOnly(current []gatev1.ClusterHarnessAgentPolicy) (dropped int) {
	keep := map[string]bool{}
	for i := range current {
		if e := current[i].Spec.Egress; e != nil && len(e.AllowedHosts) > 0 {
			keep[current[i].Name] = true
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, st := range h.hosts {
		if !keep[name] {
			delete(h.hosts, name)
			dropped += len(st.last.Addresses)
		}
	}
	return dropped
}

// earlier is the earlier of two due times, zero being none.
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
