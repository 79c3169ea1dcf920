package membership

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/intutic/gate-operator/internal/confirm"
)

// The exactly-once schedules: members on a fake clock, each applying what it counts live to a
// real confirm.Shard (as cmd/confirmer does), over 1,000 session ids, with the numbers of issue
// 24: renew 1 s, warm-up 2 s, fence 10 s (expiry 20 s).

const sessions = 1000

type replica struct {
	m     *member
	shard *confirm.Shard
}

// cluster steps replicas through one schedule and counts, after every replica's step, the
// sessions with two owners and the sessions with none.
type cluster struct {
	t        *testing.T
	now      time.Time
	replicas map[string]*replica
	ids      []string
	// worst is the most sessions with two owners seen at once; doubled the seconds during
	// which some session had two; unowned and unownedFor the same for sessions with none.
	worst, unowned           int
	doubled, unownedFor      time.Duration
	lastDoubled, lastUnowned time.Time
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), replicas: map[string]*replica{}}
	for i := range sessions {
		c.ids = append(c.ids, fmt.Sprintf("sesn_%04d", i))
	}
	return c
}

func (c *cluster) add(id string, leases coordinationv1client.LeasesGetter) *replica {
	r := &replica{m: newMember(c.t, leases, id, &c.now), shard: confirm.NewShard(id)}
	c.replicas[id] = r
	return r
}

// step advances the clock by d, then ticks each replica in order, applying what it counts
// live to its shard (OnChange returns before the next replica runs), and counts the owners.
func (c *cluster) step(d time.Duration, order ...string) {
	c.now = c.now.Add(d)
	for _, id := range order {
		r := c.replicas[id]
		r.m.tick(context.Background())
		apply(r)
		c.count()
	}
}

func (c *cluster) count() {
	double, none := 0, 0
	for _, s := range c.ids {
		owners := 0
		for _, r := range c.replicas {
			if r.shard.Owns(s) {
				owners++
			}
		}
		switch {
		case owners > 1:
			double++
		case owners == 0:
			none++
		}
	}
	if double > c.worst {
		c.worst = double
	}
	if none > c.unowned {
		c.unowned = none
	}
	if double > 0 && c.lastDoubled != c.now {
		c.doubled += time.Second
		c.lastDoubled = c.now
	}
	if none > 0 && c.lastUnowned != c.now {
		c.unownedFor += time.Second
		c.lastUnowned = c.now
	}
}

func (c *cluster) settle(order ...string) {
	for range 8 {
		c.step(renew, order...)
	}
	for _, id := range order {
		if got := c.replicas[id].m.live(); len(got) != len(order) {
			c.t.Fatalf("%s counts %v after settling", id, got)
		}
	}
	c.worst, c.unowned, c.doubled, c.unownedFor = 0, 0, 0, 0
}

// lease edits the members annotation as someone other than the members would.
func editAnnotation(t *testing.T, leases coordinationv1client.LeasesGetter, edit func(string) string) {
	t.Helper()
	ctx := context.Background()
	l, err := leases.Leases("agents").Get(ctx, "coding-agents-confirmer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Annotations[Annotation] = edit(l.Annotations[Annotation])
	if _, err := leases.Leases("agents").Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestNoTwoOwnersWhileAMemberCannotRenewAndAnotherJoins: b is cut off from the API server
// while c joins. c may count itself only once b has applied a membership with c in it, which b
// cannot do: c stays out until b has fenced itself and its entry has expired.
func TestNoTwoOwnersWhileAMemberCannotRenewAndAnotherJoins(t *testing.T) {
	shared := fake.NewClientset().CoordinationV1()
	bLink := &cut{LeasesGetter: shared}
	c := newCluster(t)
	c.add("confirmer-a", shared)
	c.add("confirmer-b", bLink)
	c.settle("confirmer-a", "confirmer-b")

	bLink.down.Store(true)
	c.add("confirmer-c", shared)
	for range int(expiry/renew) + 6 {
		c.step(renew, "confirmer-a", "confirmer-c", "confirmer-b")
	}
	t.Logf("b cut off while c joins: at most %d of %d sessions had two owners, for %s; at most %d had none, for %s", c.worst, sessions, c.doubled, c.unowned, c.unownedFor)
	if c.worst != 0 {
		t.Errorf("%d of %d sessions had two owners for %s", c.worst, sessions, c.doubled)
	}
	ac := []string{"confirmer-a", "confirmer-c"}
	want(t, c.replicas["confirmer-a"].m, ac...)
	want(t, c.replicas["confirmer-c"].m, ac...)
	want(t, c.replicas["confirmer-b"].m)
}

// TestNoTwoOwnersWhenAnEntryIsRemoved: someone else's update removes b's entry from the
// annotation; a keeps counting b (a missing entry is an unchanged one), and b writes it again.
func TestNoTwoOwnersWhenAnEntryIsRemoved(t *testing.T) {
	shared := fake.NewClientset().CoordinationV1()
	c := newCluster(t)
	c.add("confirmer-a", shared)
	c.add("confirmer-b", shared)
	c.settle("confirmer-a", "confirmer-b")

	editAnnotation(t, shared, func(raw string) string { return dropEntry(t, raw, "confirmer-b") })
	for range 4 {
		c.step(renew, "confirmer-a", "confirmer-b")
	}
	t.Logf("b's entry removed: at most %d of %d sessions had two owners, for %s; at most %d had none, for %s", c.worst, sessions, c.doubled, c.unowned, c.unownedFor)
	if c.worst != 0 {
		t.Errorf("%d of %d sessions had two owners for %s", c.worst, sessions, c.doubled)
	}
	ab := []string{"confirmer-a", "confirmer-b"}
	want(t, c.replicas["confirmer-a"].m, ab...)
	want(t, c.replicas["confirmer-b"].m, ab...)
}

// TestAPhantomEntryLeavesSessionsUnownedUntilItExpires: someone else adds an entry no member
// wrote, in a form no member writes (a JSON object). The members count it live until it has
// been unchanged for the expiry: its sessions have no owner until then (their held calls wait;
// none is allowed), never two, and then the members drop it.
func TestAPhantomEntryLeavesSessionsUnownedUntilItExpires(t *testing.T) {
	shared := fake.NewClientset().CoordinationV1()
	c := newCluster(t)
	c.add("confirmer-a", shared)
	c.add("confirmer-b", shared)
	c.settle("confirmer-a", "confirmer-b")

	editAnnotation(t, shared, func(raw string) string {
		return raw[:len(raw)-1] + `,"confirmer-phantom":{"renewed":"2026-12-01T09:00:00Z","acks":["confirmer-a","confirmer-b"]}}`
	})
	for range int(expiry/renew) + 4 {
		c.step(renew, "confirmer-a", "confirmer-b")
	}
	t.Logf("phantom entry: at most %d of %d sessions had two owners, for %s; at most %d had none, for %s", c.worst, sessions, c.doubled, c.unowned, c.unownedFor)
	if c.worst != 0 {
		t.Errorf("%d of %d sessions had two owners for %s", c.worst, sessions, c.doubled)
	}
	if c.unownedFor > expiry+2*renew {
		t.Errorf("sessions had no owner for %s, longer than the phantom's expiry (%s) and a renewal", c.unownedFor, expiry)
	}
	ab := []string{"confirmer-a", "confirmer-b"}
	want(t, c.replicas["confirmer-a"].m, ab...)
	want(t, c.replicas["confirmer-b"].m, ab...)
	if got := entriesOf(t, shared, "agents", "coding-agents-confirmer"); len(got) != 2 {
		t.Errorf("entries %v after the phantom expired", got)
	}
}

// apply is OnChange for the stepped tests: the shard follows what the member counts live.
// It goes through the member's reports, as Run does, so that the member acknowledges the set
// on the Lease only once the shard has it.
func apply(r *replica) {
	r.m.reports.report(r.m.live())
	r.m.reports.next(r.shard.Set)
}

func dropEntry(t *testing.T, raw, id string) string {
	t.Helper()
	var entries map[string]any
	if err := json.Unmarshal([]byte(raw), &entries); err != nil {
		t.Fatal(err)
	}
	delete(entries, id)
	out, _ := json.Marshal(entries)
	return string(out)
}

// TestALeavingMemberHandsOverAtTheNextRenewal: a member that leaves on purpose drops itself,
// applies that, and writes a tombstone; the others take its sessions at their next renewal
// (not after the expiry), never while it still holds them, and drop the tombstone after the
// expiry. A later member of the same name joins again as a new one.
func TestALeavingMemberHandsOverAtTheNextRenewal(t *testing.T) {
	shared := fake.NewClientset().CoordinationV1()
	c := newCluster(t)
	c.add("confirmer-a", shared)
	b := c.add("confirmer-b", shared)
	c.settle("confirmer-a", "confirmer-b")

	// What Run does when its context ends.
	b.shard.Set(b.m.without(b.m.live(), "confirmer-b"))
	c.count()
	b.m.leave()
	if got := entryOf(t, shared, "agents", "coding-agents-confirmer", "confirmer-b"); !parseEntry(got).left {
		t.Fatalf("b left an entry %q, not a tombstone", got)
	}
	c.step(renew, "confirmer-a")
	want(t, c.replicas["confirmer-a"].m, "confirmer-a")
	if c.worst != 0 {
		t.Errorf("%d of %d sessions had two owners during the hand-over", c.worst, sessions)
	}
	t.Logf("b left: sessions without an owner for %s (at most %d)", c.unownedFor, c.unowned)
	if c.unownedFor > renew {
		t.Errorf("b's sessions had no owner for %s: the hand-over waited for more than a renewal", c.unownedFor)
	}
	for range int(expiry / renew) {
		c.step(renew, "confirmer-a")
	}
	if got := entriesOf(t, shared, "agents", "coding-agents-confirmer"); !slices.Equal(got, []string{"confirmer-a"}) {
		t.Fatalf("entries %v after the tombstone expired", got)
	}

	delete(c.replicas, "confirmer-b")
	c.add("confirmer-b", shared)
	for range 4 {
		c.step(renew, "confirmer-a", "confirmer-b")
	}
	want(t, c.replicas["confirmer-b"].m, "confirmer-a", "confirmer-b")
	if c.worst != 0 {
		t.Errorf("%d of %d sessions had two owners when b joined again", c.worst, sessions)
	}
}

// leaveAndRejoin has b leave as Run does and puts a new b, not yet stepped, in its place.
func leaveAndRejoin(t *testing.T, c *cluster, leases coordinationv1client.LeasesGetter) {
	t.Helper()
	b := c.replicas["confirmer-b"]
	b.shard.Set(b.m.without(b.m.live(), "confirmer-b"))
	b.m.leave()
	delete(c.replicas, "confirmer-b")
	c.add("confirmer-b", leases)
}

// TestAnAcknowledgementFromBeforeTheJoinDoesNotCount: a read b's tombstone in the same
// renewal that wrote "acks=a,b", applied {a} and was then cut off. A new b reads that entry,
// which names it but was written before it joined: it stays out until a has expired.
func TestAnAcknowledgementFromBeforeTheJoinDoesNotCount(t *testing.T) {
	shared := fake.NewClientset().CoordinationV1()
	aLink := &cut{LeasesGetter: shared}
	c := newCluster(t)
	c.add("confirmer-a", aLink)
	c.add("confirmer-b", shared)
	c.settle("confirmer-a", "confirmer-b")

	b := c.replicas["confirmer-b"]
	b.shard.Set(b.m.without(b.m.live(), "confirmer-b"))
	b.m.leave()
	c.step(renew, "confirmer-a") // a reads the tombstone and applies {a}
	want(t, c.replicas["confirmer-a"].m, "confirmer-a")
	if got := entryOf(t, shared, "agents", "coding-agents-confirmer", "confirmer-a"); !slices.Contains(parseEntry(got).acks, "confirmer-b") {
		t.Fatalf("a's entry %q: the schedule needs one that still acknowledges b", got)
	}
	aLink.down.Store(true)
	delete(c.replicas, "confirmer-b")
	c.add("confirmer-b", shared)
	for range int(fence/renew) + 2 {
		c.step(renew, "confirmer-b", "confirmer-a")
	}
	if c.worst != 0 {
		t.Errorf("%d of %d sessions had two owners: b counted an acknowledgement written before it joined", c.worst, sessions)
	}
	want(t, c.replicas["confirmer-b"].m, "confirmer-a")
}

// TestAnAcknowledgementWaitsForPendingReports: a has read b's tombstone and is applying {a}
// (a slow OnChange) when a new b joins. a's entries meanwhile acknowledge only what every
// set from the applied one on includes, so the new b stays out until a has applied {a, b}.
func TestAnAcknowledgementWaitsForPendingReports(t *testing.T) {
	shared := fake.NewClientset().CoordinationV1()
	c := newCluster(t)
	a := c.add("confirmer-a", shared)
	c.add("confirmer-b", shared)
	c.settle("confirmer-a", "confirmer-b")

	leaveAndRejoin(t, c, shared)
	c.now = c.now.Add(renew)
	a.m.tick(context.Background())
	a.m.reports.report(a.m.live())
	a.m.reports.next(func(members []string) {
		a.shard.Set(members) // a owns every session now; OnChange has not returned
		c.count()
		for range 4 {
			c.step(renew, "confirmer-b")
			a.m.tick(context.Background()) // renews while OnChange runs
			a.m.reports.report(a.m.live())
			c.count()
		}
		if c.worst != 0 {
			t.Errorf("%d of %d sessions had two owners while a's OnChange ran", c.worst, sessions)
		}
		want(t, c.replicas["confirmer-b"].m, "confirmer-a")
	})
	for range 3 {
		c.step(renew, "confirmer-a", "confirmer-b")
	}
	want(t, c.replicas["confirmer-b"].m, "confirmer-a", "confirmer-b")
	if c.worst != 0 {
		t.Errorf("%d of %d sessions had two owners", c.worst, sessions)
	}
}

// TestAMemberOnlyOthersNameKeepsAJoinerOut: d is cut off, and someone removes its entry again
// before each of c's reads (a and b write it back each renewal). a and b still count d and
// name it in their acks, so c, which never reads an entry of d, stays out until they have
// dropped d, never beside d.
func TestAMemberOnlyOthersNameKeepsAJoinerOut(t *testing.T) {
	shared := fake.NewClientset().CoordinationV1()
	dLink := &cut{LeasesGetter: shared}
	c := newCluster(t)
	c.add("confirmer-a", shared)
	c.add("confirmer-b", shared)
	c.add("confirmer-d", dLink)
	c.settle("confirmer-a", "confirmer-b", "confirmer-d")

	dLink.down.Store(true)
	editAnnotation(t, shared, func(raw string) string { return dropEntry(t, raw, "confirmer-d") })
	c.add("confirmer-c", shared)
	c.step(renew, "confirmer-c")
	for range int(expiry/renew) + 4 {
		c.step(renew, "confirmer-a", "confirmer-b")
		editAnnotation(t, shared, func(raw string) string { return dropEntry(t, raw, "confirmer-d") })
		c.step(0, "confirmer-c", "confirmer-d")
	}
	t.Logf("d cut off and removed while c joins: at most %d of %d sessions had two owners; at most %d had none, for %s", c.worst, sessions, c.unowned, c.unownedFor)
	if c.worst != 0 {
		t.Errorf("%d of %d sessions had two owners for %s", c.worst, sessions, c.doubled)
	}
	abc := []string{"confirmer-a", "confirmer-b", "confirmer-c"}
	want(t, c.replicas["confirmer-c"].m, abc...)
}
