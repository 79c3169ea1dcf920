// Package membership keeps the live members of a group of confirmer replicas in one
// coordination.k8s.io Lease, so that they share the sessions (confirm.Shard): each replica
// renews its own entry in the Lease every Renew, reads the others', and reports the members it
// counts live whenever that set changes.
//
// An entry is a string: the time its member last renewed, by its own clock (for people), then
// either "acks=" and the members of the last set its OnChange applied (returned from) and that
// no later report has changed since (sorted, comma-separated), or "left":
//
//	{"confirmer-a":"2026-12-01T09:00:03Z acks=confirmer-a,confirmer-b","confirmer-b":"2026-12-01T09:00:03.4Z left"}
//
// An entry in the older form (the time alone), or one that does not read, acknowledges nobody.
//
// Two replicas answer one session only if one of them counts itself while missing from the
// other's members. The order of events rules that out:
//   - a replica that joins writes its entry, and counts itself only once Warmup has passed and
//     every other member it counts live has written its entry again since, acknowledging it:
//     that member has read the entry, applied a membership that includes the joiner (so it has
//     let go of the joiner's sessions) and has no report pending that leaves it out. A member
//     named in a live entry's acks that has no entry of its own keeps the joiner out too. Once
//     counted it stays counted until it fences itself or leaves;
//   - a member that cannot renew cannot acknowledge: a joiner stays out until that member has
//     fenced itself and its entry has expired (the others count the joiner live at once, so its
//     sessions have no owner meanwhile: their held calls wait, none is allowed);
//   - a replica that leaves (its context ends) first drops itself, waits for its passes to end
//     (OnChange returns then), and only then replaces its entry with "left"; the others drop it
//     at their next renewal, and drop the tombstone from the Lease after Expiry;
//   - a replica that dies stops renewing; the others count it dead once its entry has not
//     changed for Expiry, as each observes it, and then drop the entry from the Lease;
//   - a replica that cannot renew for Fence (shorter than Expiry by more than a renewal) drops
//     itself before the others can count it dead, and joins again, with a new warm-up and new
//     acknowledgements, once it renews;
//   - an entry missing from the Lease (someone removed it) is an unchanged entry, not a gone
//     one: the others keep counting it until Expiry and write it back as they last read it,
//     so no write by anyone else can make a member drop another faster than its expiry.
//
// Liveness is judged by change, on the reader's clock, never by comparing timestamps written
// by another replica: the replicas' clocks need not agree. Only the confirmer's ServiceAccount
// may write the Lease (config/admission-policies/confirmer-members-lease.yaml): a forged
// "left" or a forged acknowledgement is what that policy keeps out.
package membership

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Annotation holds the members on the Lease: a JSON object from each member's identity to its
// entry (see the package doc).
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
	// without renewing before it drops itself; Warmup how long a joining replica waits at least
	// before it counts itself (it also waits for every live member's acknowledgement). Zero
	// takes the defaults (Warmup: two renewals); Fence plus two renewals must stay below Expiry.
	Renew, Expiry, Fence, Warmup time.Duration
	// OnChange receives the live members, sorted, whenever they change, from one goroutine
	// at a time; a slow OnChange delays the next report, never a renewal. A set is
	// acknowledged on the Lease only once OnChange has returned for it: it must have let go
	// of every session the set gives to another member by then (confirm.Shard.Set does).
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

// observation is the last value read of another member's entry, and when and by which read it
// was first seen.
type observation struct {
	value string
	at    time.Time
	read  uint64
}

// entry is what an entry's value says.
type entry struct {
	left bool
	acks []string
}

// parseEntry reads an entry: "<time> acks=<a,b,...>" or "<time> left"; anything else (the
// older "<time>" form, a value that is not a string) acknowledges nobody.
func parseEntry(value string) entry {
	fields := strings.Fields(value)
	if len(fields) != 2 {
		return entry{}
	}
	if fields[1] == "left" {
		return entry{left: true}
	}
	if list, ok := strings.CutPrefix(fields[1], "acks="); ok && list != "" {
		return entry{acks: strings.Split(list, ",")}
	}
	return entry{}
}

func formatEntry(now time.Time, e entry) string {
	ts := now.UTC().Format(time.RFC3339Nano)
	if e.left {
		return ts + " left"
	}
	return ts + " acks=" + strings.Join(e.acks, ",")
}

// reports hands the live members from the renewal loop to OnChange, and says which members
// this replica acknowledges: those in the last set OnChange returned for and in every set
// reported since (the one being applied and the one waiting).
type reports struct {
	mu                          sync.Mutex
	wake                        chan struct{}
	applied, inflight, queued   []string
	hasInflight, hasQueued, end bool
}

func newReports() *reports { return &reports{wake: make(chan struct{}, 1), applied: []string{}} }

// report replaces the set waiting to be applied.
func (r *reports) report(members []string) {
	r.mu.Lock()
	r.queued, r.hasQueued = members, true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// close makes apply return once the waiting set is applied.
func (r *reports) close() {
	r.mu.Lock()
	r.end = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// apply runs onChange for each set reported, the latest only, until close.
func (r *reports) apply(onChange func([]string)) {
	for {
		applied, end := r.next(onChange)
		if end {
			return
		}
		if !applied {
			<-r.wake
		}
	}
}

// next applies the set waiting, if one is; end reports that none is and close was called.
func (r *reports) next(onChange func([]string)) (applied, end bool) {
	r.mu.Lock()
	if !r.hasQueued {
		defer r.mu.Unlock()
		return false, r.end
	}
	r.inflight, r.hasInflight = r.queued, true
	r.queued, r.hasQueued = nil, false
	members := r.inflight
	r.mu.Unlock()
	onChange(members)
	r.mu.Lock()
	r.applied, r.inflight, r.hasInflight = members, nil, false
	r.mu.Unlock()
	return true, false
}

// acks are the members this replica acknowledges now.
func (r *reports) acks() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(r.applied), func(id string) bool {
		return (r.hasInflight && !slices.Contains(r.inflight, id)) || (r.hasQueued && !slices.Contains(r.queued, id))
	})
}

// member is the state of this replica between renewals.
type member struct {
	o       Options
	reports *reports
	seen    map[string]observation
	reads   uint64 // Lease reads so far; wrote is the one the last successful write followed
	wrote   uint64
	// joined is the first renewal since joining (again), zero while out; joinedRead the read
	// that renewal's write followed; counted whether it counts itself.
	joined     time.Time
	joinedRead uint64
	counted    bool
	lastRenew  time.Time
}

func makeMember(o Options) *member {
	return &member{o: o, reports: newReports(), seen: map[string]observation{}}
}

// Run keeps this replica a member until ctx ends, then leaves: it reports the members without
// itself, waits for that OnChange to return, and replaces its entry with a tombstone.
func Run(ctx context.Context, o Options) error {
	if err := o.defaults(); err != nil {
		return err
	}
	m := makeMember(o)
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		m.reports.apply(o.OnChange)
	}()
	var reported []string
	ticker := time.NewTicker(o.Renew)
	defer ticker.Stop()
	for {
		m.tick(ctx)
		if live := m.live(); reported == nil || !slices.Equal(live, reported) {
			reported = live
			m.reports.report(live)
		}
		select {
		case <-ctx.Done():
			m.reports.close()
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
			m.joined, m.joinedRead = now, m.wrote
			m.o.Log.Info("joined the members", "lease", m.o.Name, "identity", m.o.Identity)
		}
		m.lastRenew = now
	case ctx.Err() == nil:
		m.o.Log.Error(err, "renewing membership", "lease", m.o.Name)
	}
	if !m.joined.IsZero() && now.Sub(m.lastRenew) > m.o.Fence {
		m.o.Log.Info("could not renew membership: leaving the sessions to the others until it can", "lease", m.o.Name, "lastRenewal", m.lastRenew)
		m.joined, m.counted = time.Time{}, false
	}
}

// live are the members this replica counts now: the others whose entries changed within
// Expiry and did not leave, and itself once warmed up and acknowledged.
func (m *member) live() []string {
	now := m.o.Now()
	out := []string{}
	for id, ob := range m.seen {
		if now.Sub(ob.at) < m.o.Expiry && !parseEntry(ob.value).left {
			out = append(out, id)
		}
	}
	if !m.counted && !m.joined.IsZero() && now.Sub(m.joined) >= m.o.Warmup && m.acknowledged(out) {
		m.counted = true
		m.o.Log.Info("every live member acknowledged this replica: counting itself", "lease", m.o.Name, "identity", m.o.Identity)
	}
	if m.counted {
		out = append(out, m.o.Identity)
	}
	slices.Sort(out)
	return out
}

// acknowledged reports whether every other live member has written its entry since this
// replica joined, acknowledging it, and every member those entries acknowledge is known here.
func (m *member) acknowledged(others []string) bool {
	for _, id := range others {
		ob := m.seen[id]
		e := parseEntry(ob.value)
		if ob.read <= m.joinedRead || !slices.Contains(e.acks, m.o.Identity) {
			return false
		}
		for _, named := range e.acks {
			if _, known := m.seen[named]; !known && named != m.o.Identity {
				return false
			}
		}
	}
	return true
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
			if err == nil {
				m.wrote = m.reads
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
		if err == nil {
			m.wrote = m.reads
		}
		return err
	}
	return err
}

// entries parses the annotation. An entry whose value is not a string keeps its JSON text as
// its value (it acknowledges nobody); an annotation that does not parse has no entries, and so
// changes none (every member writes back what it last read).
func (m *member) entries(lease *coordinationv1.Lease) map[string]string {
	entries := map[string]string{}
	raw := lease.Annotations[Annotation]
	if raw == "" {
		return entries
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &values); err != nil {
		m.o.Log.Error(err, "the members annotation of the Lease does not parse; writing back the entries last read", "lease", m.o.Name)
		return entries
	}
	for id, v := range values {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
		entries[id] = s
	}
	return entries
}

// observe records the entries of the other members as read now, and returns the entries to
// write: this replica's renewed, the others' as last read (an entry missing from the Lease is
// unchanged, so it is written back), and those unchanged for Expiry dropped.
func (m *member) observe(entries map[string]string) map[string]string {
	m.reads++
	now := m.o.Now()
	for id, v := range entries {
		if id == m.o.Identity {
			continue
		}
		if ob, ok := m.seen[id]; !ok || ob.value != v {
			m.seen[id] = observation{value: v, at: now, read: m.reads}
		}
	}
	out := map[string]string{}
	for id, ob := range m.seen {
		switch age := now.Sub(ob.at); {
		case age < m.o.Expiry:
			out[id] = ob.value
		case age >= 2*m.o.Expiry:
			// Forgotten only well after it was dropped: a member that read it later and
			// wrote it back meanwhile does not make it new here.
			delete(m.seen, id)
		}
	}
	out[m.o.Identity] = formatEntry(now, entry{acks: m.reports.acks()})
	return out
}

func (m *member) write(lease *coordinationv1.Lease, entries map[string]string) {
	raw, _ := json.Marshal(entries) // a map of strings always encodes
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[Annotation] = string(raw)
}

// leave replaces this replica's entry with a tombstone, so the others take its sessions at
// their next renewal rather than after Expiry (they drop the tombstone after Expiry). Every
// other member writes the same Lease each Renew, so an update can lose to theirs several times
// running: it tries again until leaveTimeout, not a fixed number of times.
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
		entries[m.o.Identity] = formatEntry(m.o.Now(), entry{left: true})
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
