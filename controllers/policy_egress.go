package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sync"
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
	want.ceilings = ceilingsFingerprint(o.ceilings)
	if want.build.HeldBack() {
		neverCompiled := want.build.Snapshot.Invalid != ""
		// A NetworkPolicy rendered under other ceilings than those in force is not kept: a
		// ceiling tightened while the policy's rules cannot be published still applies.
		if np := o.networkPolicy; !neverCompiled && np != nil && ownedBy(np, p) && np.Annotations[gatev1.AnnotationEgressCeilings] == want.ceilings {
			want.egressKept = true
			want.egress = egress.Egress{Mode: egress.ModeOf(np.Spec.Egress, r.Canary)}
			return
		}
		denyAll := p.Spec.DeepCopy()
		denyAll.Egress = gatev1.EgressSpec{}
		want.egress = egress.RenderEgress(denyAll, nil, r.DNS, r.Canary, nil, nil)
		withHumanLane(p, &want.egress)
		return
	}
	want.resolution = o.resolution
	var hosts map[string][]netip.Addr
	if want.resolution != nil {
		hosts = want.resolution.Hosts
	}
	want.egress = egress.RenderEgress(&p.Spec, hosts, r.DNS, r.Canary, r.ClusterCIDRs, o.ceilings)
	withHumanLane(p, &want.egress)
}

// withHumanLane adds to e the egress of the policy's human lane (spec.gateAgent.humanApproval):
// its SessionConfirmer's pods on the gate API port, whatever the policy's egress says, as the
// canary's rule is added: gate-agent, not the agent, needs it. Deny-all stays deny-all.
func withHumanLane(p *gatev1.HarnessAgentPolicy, e *egress.Egress) {
	if p.Spec.GateAgent == nil || p.Spec.GateAgent.HumanApproval == nil {
		return
	}
	e.Spec.WithEgress(egress.HumanLaneRule(p.Spec.GateAgent.HumanApproval.Confirmer))
}

// policyHosts is the resolution state of one policy's allowed hosts (or one cluster policy's
// ceiling hosts, ceilingHosts), kept between reconciles. mu serialises its resolutions: a
// ceiling's hosts are resolved by the reconciles of every namespace under it, concurrently.
type policyHosts struct {
	mu    sync.Mutex
	cache egress.HostAddresses
	hosts []string
	last  egress.Resolution
}

// resolve returns the addresses to allow for the policy's hosts, resolving them when they are
// due (at the records' TTL, within the floor and cap) or when the host list changed. It runs
// inside the reconcile; the requeue brings the next resolution.
func (r *HarnessAgentPolicyReconciler) resolve(ctx context.Context, p *gatev1.HarnessAgentPolicy) *egress.Resolution {
	return r.resolveHosts(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, p.Spec.Egress.AllowedHosts)
}

// resolveHosts resolves the hosts kept under key, a namespace policy's namespace and name.
func (r *HarnessAgentPolicyReconciler) resolveHosts(ctx context.Context, key types.NamespacedName, allowed []gatev1.Hostname) *egress.Resolution {
	hosts := sortedHosts(allowed)
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
	res, before := st.resolve(ctx, r.Resolver, hosts, r.Clock.Now(), r.MinResolve, r.MaxResolve)
	r.mu.Lock()
	r.addAddresses(len(res.Addresses) - before)
	r.mu.Unlock()
	return &res
}

// sortedHosts are the allowed hosts, sorted, each once.
func sortedHosts(allowed []gatev1.Hostname) []string {
	hosts := make([]string, 0, len(allowed))
	for _, h := range allowed {
		hosts = append(hosts, string(h))
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// resolve resolves the hosts when they are due (at the records' TTL, within the floor and the
// cap) or changed, and returns their resolution and how many addresses st held before. The
// hosts are looked up at once, a few at a time, each under its own timeout: a reconcile waits
// for its slowest host, not for the sum of them.
func (st *policyHosts) resolve(ctx context.Context, resolver egress.Resolver, hosts []string, now time.Time, minResolve, maxResolve time.Duration) (res egress.Resolution, before int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	before = len(st.last.Addresses)
	if !st.cache.Due(now) && slices.Equal(st.hosts, hosts) {
		return st.last, before
	}
	records := make([][]egress.Record, len(hosts))
	var g errgroup.Group
	g.SetLimit(resolveConcurrency)
	for i, h := range hosts {
		g.Go(func() error {
			hctx, cancel := context.WithTimeout(ctx, resolveTimeout)
			defer cancel()
			recs, err := resolver.Resolve(hctx, h)
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
	st.hosts = hosts
	st.last = st.cache.Update(now, hosts, results, minResolve, maxResolve)
	return st.last, before
}

// ceilings returns the egress ceilings of the cluster policies selecting the policy's namespace
// (whatever their podSelector: the NetworkPolicy selects by the namespace policy's pods, and
// bounding more pods than a ceiling selects is the safe side), their hosts resolved when due,
// and when the first of them is due again.
func (r *HarnessAgentPolicyReconciler) ceilings(ctx context.Context, selecting []*gatev1.ClusterHarnessAgentPolicy) ([]egress.Ceiling, time.Time) {
	var out []egress.Ceiling
	var next time.Time
	for _, c := range selecting {
		if c.Spec.Egress == nil {
			continue
		}
		ceiling, due, delta := r.ceilingHosts.ceiling(ctx, c, r.Resolver, r.Clock.Now(), r.MinResolve, r.MaxResolve)
		if delta != 0 {
			r.mu.Lock()
			r.addAddresses(delta)
			r.mu.Unlock()
		}
		next = earlier(next, due)
		out = append(out, ceiling)
	}
	return out, next
}

// ceilingsFingerprint identifies the ceilings a NetworkPolicy was rendered within (their
// policies and egress specs), so one kept while its policy's rules cannot be published is kept
// only under the ceilings it was rendered for.
func ceilingsFingerprint(ceilings []egress.Ceiling) string {
	if len(ceilings) == 0 {
		return ""
	}
	h := sha256.New()
	for _, c := range ceilings {
		spec, _ := json.Marshal(c.Spec) // plain structs always marshal
		fmt.Fprintf(h, "%s\x00%s\x00", c.Policy, spec)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
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
		if !egress.AllowsEgress(&np) {
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
