// Package membership keeps the live members of a group of confirmer replicas in one
// coordination.k8s.io Lease, so that they share the sessions (confirm.Shard): each replica
// renews its own entry in the Lease every Renew, reads the others', and reports the members it
// counts live whenever that set changes.
//
// The order of events is what keeps two replicas from answering one session:
//   - a replica that joins counts itself only Warmup after its first renewal, by which time
//     the others have read its entry and let go of the sessions it takes;
//   - a replica that leaves (its context ends) first drops itself, waits for its passes to
//     end (OnChange returns then), and only then removes its entry;
//   - a replica that dies stops renewing; the others count it dead once its entry has not
//     changed for Expiry, as each observes it;
//   - a replica that cannot renew for Fence (shorter than Expiry by more than a renewal) drops
//     itself before the others can count it dead, and joins again, with a new warm-up, once it
//     renews.
//
// Liveness is judged by change, on the reader's clock, never by comparing timestamps written
// by another replica: the replicas' clocks need not agree.
package membership

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Annotation holds the members on the Lease: a JSON object from each member's identity to the
// time it last renewed, by its own clock (for people reading the Lease; see the package doc).
const Annotation = "gate.intutic.io/members"

// Defaults: a dead replica's sessions are taken over about Expiry plus one renewal after its
// last renewal (22 s), and each replica writes the Lease every 2 s, as leader election does.
const (
	DefaultRenew  = 2 * time.Second
	DefaultExpiry = 20 * time.Second
	DefaultFence  = 10 * time.Second
	// renewAttempts bounds the get-update rounds of one renewal that lose to another replica's
	// write (409 Conflict).
	renewAttempts = 3
	// leaveTimeout bounds removing the entry on the way out.
	leaveTimeout = 5 * time.Second
)

// Options configure a member.
type Options struct {
	Leases    coordinationv1client.LeasesGetter
	Namespace string
	Name      string // of the Lease
	Identity  string // of this replica, unique among the members (the pod name)
	// Renew is how often the entry is renewed and the others' read; Expiry how long an entry
	// may stay unchanged before its member counts as dead; Fence how long this replica may go
	// without renewing before it drops itself; Warmup how long a joining replica waits before
	// it counts itself. Zero takes the defaults (Warmup: two renewals); Fence plus two
	// renewals must stay below Expiry.
	Renew, Expiry, Fence, Warmup time.Duration
	// OnChange receives the live members, sorted, whenever they change, from one goroutine
	// at a time; a slow OnChange delays the next report, never a renewal.
	OnChange func(members []string)
	Log      logr.Logger
	// Now is replaced by tests.
	Now func() time.Time
}

func (o *Options) defaults() error {
	if o.Renew <= 0 {
		o.Renew = DefaultRenew
	}
	if o.Expiry <= 0 {
		o.Expiry = DefaultExpiry
	}
	if o.Fence <= 0 {
		o.Fence = DefaultFence
	}
	if o.Warmup <= 0 {
		o.Warmup = 2 * o.Renew
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OnChange == nil {
		o.OnChange = func([]string) {}
	}
	if o.Identity == "" || o.Name == "" || o.Namespace == "" {
		return fmt.Errorf("membership: the Lease namespace (%q), name (%q) and this replica's identity (%q) are required", o.Namespace, o.Name, o.Identity)
	}
	// A renewal can take Renew (its timeout) after the tick that starts it, and the fence is
	// checked at the next tick: the replica drops itself at most Fence + 2*Renew after its
	// last renewal, which the others must not reach first.
	if o.Fence+2*o.Renew >= o.Expiry {
		return fmt.Errorf("membership: fence %s plus two renewals (%s) must be shorter than the expiry %s", o.Fence, 2*o.Renew, o.Expiry)
	}
	return nil
}

// observation is the last value seen of another member's entry, and when it was first seen.
type observation struct {
	value string
	at    time.Time
}

// member is the state of this replica between renewals.
type member struct {
	o         Options
	seen      map[string]observation
	joined    time.Time // the first renewal since joining (again); zero while out
	lastRenew time.Time
}

// Run keeps this replica a member until ctx ends, then leaves: it reports the members without
// itself, waits for that OnChange to return, and removes its entry.
func Run(ctx context.Context, o Options) error {
	if err := o.defaults(); err != nil {
		return err
	}
	m := &member{o: o, seen: map[string]observation{}}
	reports := make(chan []string, 1)
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		for members := range reports {
			o.OnChange(members)
		}
	}()
	var reported []string
	ticker := time.NewTicker(o.Renew)
	defer ticker.Stop()
	for {
		m.tick(ctx)
		if live := m.live(); reported == nil || !slices.Equal(live, reported) {
			reported = live
			select { // the latest set replaces one that has not been applied yet
			case <-reports:
			default:
			}
			reports <- live
		}
		select {
		case <-ctx.Done():
			close(reports)
			<-applied
			o.OnChange(m.without(reported, o.Identity))
			m.leave()
			return nil
		case <-ticker.C:
		}
	}
}

// tick renews the entry, reads the others', and drops this replica when it could not renew
// for Fence.
func (m *member) tick(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, m.o.Renew)
	err := m.renew(rctx)
	cancel()
	now := m.o.Now()
	switch {
	case err == nil:
		if m.joined.IsZero() {
			m.joined = now
			m.o.Log.Info("joined the members", "lease", m.o.Name, "identity", m.o.Identity)
		}
		m.lastRenew = now
	case ctx.Err() == nil:
		m.o.Log.Error(err, "renewing membership", "lease", m.o.Name)
	}
	if !m.joined.IsZero() && now.Sub(m.lastRenew) > m.o.Fence {
		m.o.Log.Info("could not renew membership: leaving the sessions to the others until it can", "lease", m.o.Name, "lastRenewal", m.lastRenew)
		m.joined = time.Time{}
	}
}

// live are the members this replica counts now: the others whose entries changed within
// Expiry, and itself once warmed up.
func (m *member) live() []string {
	now := m.o.Now()
	out := []string{}
	for id, ob := range m.seen {
		if now.Sub(ob.at) < m.o.Expiry {
			out = append(out, id)
		}
	}
	if !m.joined.IsZero() && now.Sub(m.joined) >= m.o.Warmup {
		out = append(out, m.o.Identity)
	}
	slices.Sort(out)
	return out
}

func (m *member) without(members []string, id string) []string {
	return slices.DeleteFunc(slices.Clone(members), func(s string) bool { return s == id })
}

// renew reads the Lease (creating it when missing), records the others' entries, writes this
// replica's entry and drops the entries of members it counts dead.
func (m *member) renew(ctx context.Context) error {
	leases := m.o.Leases.Leases(m.o.Namespace)
	var err error
	for range renewAttempts {
		var lease *coordinationv1.Lease
		lease, err = leases.Get(ctx, m.o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: m.o.Name, Namespace: m.o.Namespace}}
			m.write(lease, m.observe(nil))
			if _, err = leases.Create(ctx, lease, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		m.write(lease, m.observe(m.entries(lease)))
		if _, err = leases.Update(ctx, lease, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
			continue
		}
		return err
	}
	return err
}

// entries parses the annotation; one that does not parse counts as empty (every member
// rewrites its own entry within a renewal).
func (m *member) entries(lease *coordinationv1.Lease) map[string]string {
	entries := map[string]string{}
	if raw := lease.Annotations[Annotation]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &entries); err != nil {
			m.o.Log.Error(err, "the members annotation of the Lease does not parse; rewriting it", "lease", m.o.Name)
			entries = map[string]string{}
		}
	}
	return entries
}

// observe records the entries of the other members as read now, and returns the entries to
// write: this replica's renewed, and those of members dead for Expiry dropped.
func (m *member) observe(entries map[string]string) map[string]string {
	now := m.o.Now()
	for id := range m.seen {
		if _, ok := entries[id]; !ok {
			delete(m.seen, id) // it left, or another replica dropped it as dead
		}
	}
	out := map[string]string{}
	for id, v := range entries {
		if id == m.o.Identity {
			continue
		}
		if ob, ok := m.seen[id]; !ok || ob.value != v {
			m.seen[id] = observation{value: v, at: now}
		}
		if now.Sub(m.seen[id].at) < m.o.Expiry {
			out[id] = v
		}
	}
	out[m.o.Identity] = now.UTC().Format(time.RFC3339Nano)
	return out
}

func (m *member) write(lease *coordinationv1.Lease, entries map[string]string) {
	raw, _ := json.Marshal(entries) // a map of strings always encodes
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[Annotation] = string(raw)
}

// leave removes this replica's entry, so the others take its sessions at their next renewal
// rather than after Expiry. Every other member writes the same Lease each Renew, so an update
// can lose to theirs several times running: it tries again until leaveTimeout, not a fixed
// number of times.
func (m *member) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	leases := m.o.Leases.Leases(m.o.Namespace)
	for ctx.Err() == nil {
		lease, err := leases.Get(ctx, m.o.Name, metav1.GetOptions{})
		if err != nil {
			m.o.Log.Error(err, "leaving the members: the others take over when the entry expires", "lease", m.o.Name)
			return
		}
		entries := m.entries(lease)
		if _, ok := entries[m.o.Identity]; !ok {
			return
		}
		delete(entries, m.o.Identity)
		m.write(lease, entries)
		if _, err = leases.Update(ctx, lease, metav1.UpdateOptions{}); err == nil || !apierrors.IsConflict(err) {
			if err != nil {
				m.o.Log.Error(err, "leaving the members: the others take over when the entry expires", "lease", m.o.Name)
			}
			return
		}
	}
	m.o.Log.Error(ctx.Err(), "leaving the members: every update lost to another member's; the others take over when the entry expires", "lease", m.o.Name)
}
