package controllers

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/egress"
)

// resolveTimeout bounds one host's lookup inside a reconcile.
const resolveTimeout = 5 * time.Second

// resolveConcurrency bounds the lookups one reconcile runs at once (spec.egress.allowedHosts
// holds at most 128 names).
const resolveConcurrency = 8

// computeEgress is the egress phase: the NetworkPolicy to apply, the resolution behind it and
// the policies that shadow it. It runs after the rules were compiled: an invalid policy never
// loosens anything in force, so while the rules cannot be published (they do not compile, or
// their bundle is too large) the NetworkPolicy in force stays as it is, and a policy whose
// rules never compiled (or that has no NetworkPolicy in force) denies all egress. The update's
// egress is applied once its rules can be published.
func (r *HarnessAgentPolicyReconciler) computeEgress(p *gatev1.HarnessAgentPolicy, o *observedState, want *desiredState) {
	want.shadowing = shadowingPolicies(&p.Spec.PodSelector, o.others, o.podLabels)
	if want.build.HeldBack() {
		neverCompiled := want.build.Snapshot.Invalid != ""
		if np := o.networkPolicy; !neverCompiled && np != nil && ownedBy(np, p) {
			want.egressKept = true
			want.egress = egress.Egress{Mode: egress.ModeOf(np.Spec.Egress, r.Canary)}
			return
		}
		denyAll := p.Spec.DeepCopy()
		denyAll.Egress = gatev1.EgressSpec{}
		want.egress = egress.RenderEgress(denyAll, nil, r.DNS, r.Canary, nil)
		return
	}
	want.resolution = o.resolution
	var hosts map[string][]netip.Addr
	if want.resolution != nil {
		hosts = want.resolution.Hosts
	}
	want.egress = egress.RenderEgress(&p.Spec, hosts, r.DNS, r.Canary, r.ClusterCIDRs)
}

// policyHosts is the resolution state of one policy's allowed hosts, kept between reconciles.
type policyHosts struct {
	cache egress.HostAddresses
	hosts []string
	last  egress.Resolution
}

// resolve returns the addresses to allow for the policy's hosts, resolving them when they are
// due (at the records' TTL, within the floor and cap) or when the host list changed. It runs
// inside the reconcile; the requeue brings the next resolution.
func (r *HarnessAgentPolicyReconciler) resolve(ctx context.Context, p *gatev1.HarnessAgentPolicy) *egress.Resolution {
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	hosts := make([]string, 0, len(p.Spec.Egress.AllowedHosts))
	for _, h := range p.Spec.Egress.AllowedHosts {
		hosts = append(hosts, string(h))
	}
	slices.Sort(hosts)
	hosts = slices.Compact(hosts)
	if len(hosts) == 0 {
		r.forgetHosts(key)
		return nil
	}

	r.mu.Lock()
	if r.hosts == nil {
		r.hosts = map[types.NamespacedName]*policyHosts{}
	}
	st := r.hosts[key]
	if st == nil {
		st = &policyHosts{}
		r.hosts[key] = st
	}
	r.mu.Unlock()

	now := r.Clock.Now()
	if !st.cache.Due(now) && slices.Equal(st.hosts, hosts) {
		res := st.last
		return &res
	}
	// The hosts are looked up at once, a few at a time, each under its own timeout: a policy's
	// reconcile waits for its slowest host, not for the sum of them.
	records := make([][]egress.Record, len(hosts))
	var g errgroup.Group
	g.SetLimit(resolveConcurrency)
	for i, h := range hosts {
		g.Go(func() error {
			hctx, cancel := context.WithTimeout(ctx, resolveTimeout)
			defer cancel()
			recs, err := r.Resolver.Resolve(hctx, h)
			if err != nil {
				log.FromContext(ctx).V(1).Info("host did not resolve", "host", h, "error", err.Error())
			}
			records[i] = recs
			return nil
		})
	}
	_ = g.Wait() // lookups report no error: a host that does not resolve contributes nothing
	results := make(map[string][]egress.Record, len(hosts))
	for i, h := range hosts {
		results[h] = records[i]
	}
	r.mu.Lock()
	st.hosts = hosts
	before := len(st.last.Addresses)
	st.last = st.cache.Update(now, hosts, results, r.MinResolve, r.MaxResolve)
	res := st.last
	r.addAddresses(len(st.last.Addresses) - before)
	r.mu.Unlock()
	return &res
}

// forgetHosts drops a policy's resolution state (it allows no hosts any more).
func (r *HarnessAgentPolicyReconciler) forgetHosts(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.hosts[key]; ok {
		delete(r.hosts, key)
		r.addAddresses(-len(st.last.Addresses))
	}
}

// addAddresses moves the gauge of addresses allowed across all policies by delta; r.mu is
// held. A running total, because summing every policy's on each resolution costs O(policies).
func (r *HarnessAgentPolicyReconciler) addAddresses(delta int) {
	r.addresses += delta
	resolvedAddresses.Set(float64(r.addresses))
}

// shadowingPolicies names the other NetworkPolicies that reopen what ours denies: NetworkPolicy
// allows add up, so any policy with egress rules that selects a governed pod (or every pod in
// the namespace) widens the pod's egress.
func shadowingPolicies(governed *metav1.LabelSelector, others []networkingv1.NetworkPolicy, podLabels []map[string]string) []string {
	ours, err := metav1.LabelSelectorAsSelector(governed)
	if err != nil {
		return nil // the schema accepted it, so the API server would have too; nothing to compare
	}
	var names []string
	for _, np := range others {
		if !allowsEgress(&np) {
			continue
		}
		theirs, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			continue
		}
		if theirs.Empty() || anyPodSelected(ours, theirs, podLabels) {
			names = append(names, np.Name)
		}
	}
	slices.Sort(names)
	return names
}

func allowsEgress(np *networkingv1.NetworkPolicy) bool {
	if len(np.Spec.Egress) == 0 {
		return false
	}
	if len(np.Spec.PolicyTypes) == 0 {
		return true // with egress rules, Egress is implied
	}
	return slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
}

// selectsAll reports whether a pod selector selects every pod in its namespace.
func selectsAll(s *metav1.LabelSelector) bool {
	return len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

func anyPodSelected(ours, theirs labels.Selector, podLabels []map[string]string) bool {
	for _, l := range podLabels {
		set := labels.Set(l)
		if ours.Matches(set) && theirs.Matches(set) {
			return true
		}
	}
	return false
}

// podLabelsChanged passes pod events that can change shadowing: creation, deletion and label
// changes, not the status churn of running pods.
func podLabelsChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !labels.Equals(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
	}
}
