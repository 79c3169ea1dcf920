package membership

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/intutic/gate-operator/internal/apiservertest"
)

const (
	renew  = time.Second
	expiry = 20 * time.Second
	fence  = 10 * time.Second
	warmup = 2 * time.Second
)

// cut is a LeasesGetter whose calls fail while down is set: a replica cut off from the API
// server.
type cut struct {
	coordinationv1client.LeasesGetter
	down atomic.Bool
}

func (c *cut) Leases(ns string) coordinationv1client.LeaseInterface {
	return cutLeases{c.LeasesGetter.Leases(ns), &c.down}
}

type cutLeases struct {
	coordinationv1client.LeaseInterface
	down *atomic.Bool
}

var errCut = errors.New("connection refused")

func (c cutLeases) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	if c.down.Load() {
		return nil, errCut
	}
	return c.LeaseInterface.Get(ctx, name, o)
}

func (c cutLeases) Update(ctx context.Context, l *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if c.down.Load() {
		return nil, errCut
	}
	return c.LeaseInterface.Update(ctx, l, o)
}

func (c cutLeases) Create(ctx context.Context, l *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if c.down.Load() {
		return nil, errCut
	}
	return c.LeaseInterface.Create(ctx, l, o)
}

// newMember is a member on the shared fake clock, not running: the test ticks it.
func newMember(t *testing.T, leases coordinationv1client.LeasesGetter, id string, now *time.Time) *member {
	t.Helper()
	o := Options{Leases: leases, Namespace: "agents", Name: "coding-agents-confirmer", Identity: id,
		Renew: renew, Expiry: expiry, Fence: fence, Warmup: warmup, Log: logr.Discard(), Now: func() time.Time { return *now }}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	return makeMember(o)
}

func entriesOf(t *testing.T, leases coordinationv1client.LeasesGetter, ns, name string) []string {
	t.Helper()
	l, err := leases.Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var entries map[string]string
	if err := json.Unmarshal([]byte(l.Annotations[Annotation]), &entries); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for id := range entries {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func entryOf(t *testing.T, leases coordinationv1client.LeasesGetter, ns, name, id string) string {
	t.Helper()
	l, err := leases.Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var entries map[string]string
	if err := json.Unmarshal([]byte(l.Annotations[Annotation]), &entries); err != nil {
		t.Fatal(err)
	}
	return entries[id]
}

func want(t *testing.T, who *member, members ...string) {
	t.Helper()
	if members == nil {
		members = []string{}
	}
	if got := who.live(); !slices.Equal(got, members) {
		t.Fatalf("%s counts %v live, want %v", who.o.Identity, got, members)
	}
}

// TestJoinExpireFence steps two members through the life of a membership on a fake clock.
func TestJoinExpireFence(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	shared := fake.NewClientset().CoordinationV1()
	bLink := &cut{LeasesGetter: shared}
	a, b := newMember(t, shared, "confirmer-a", &now), newMember(t, bLink, "confirmer-b", &now)
	ctx := context.Background()
	step := func(d time.Duration, who ...*member) {
		now = now.Add(d)
		for _, m := range who {
			m.tick(ctx)
			m.reports.report(m.live())
			m.reports.next(func([]string) {})
		}
	}

	// a creates the Lease; b joins a second later and counts a at once. Each counts itself
	// only after its warm-up and once the other has written an entry acknowledging it (a
	// too: b appeared during its warm-up).
	step(0, a)
	want(t, a)
	step(renew, b)
	want(t, b, "confirmer-a")
	step(renew, a, b)
	want(t, a, "confirmer-b")
	want(t, b, "confirmer-a")
	step(renew, a, b)
	want(t, a, "confirmer-a", "confirmer-b")
	want(t, b, "confirmer-a", "confirmer-b")

	// a dies: b counts it live until its entry has been unchanged for the expiry, then drops
	// it and removes its entry from the Lease.
	for range int(expiry/renew) - 1 {
		step(renew, b)
		want(t, b, "confirmer-a", "confirmer-b")
	}
	step(renew, b)
	want(t, b, "confirmer-b")
	if got := entriesOf(t, shared, "agents", "coding-agents-confirmer"); !slices.Equal(got, []string{"confirmer-b"}) {
		t.Fatalf("entries %v after a expired", got)
	}

	// a comes back (a new pod with the same name would too): a new entry, a new warm-up, and
	// it waits for b's acknowledgement, which b, cut off next, never writes.
	a = newMember(t, shared, "confirmer-a", &now)
	step(renew, a, b)
	want(t, a, "confirmer-b")
	want(t, b, "confirmer-a", "confirmer-b")

	// b is cut off from the API server: it drops itself after the fence, well before a may
	// count it dead, and a takes everything only after the expiry.
	bLink.down.Store(true)
	var bOut, aDropsB time.Duration
	for elapsed := renew; elapsed <= expiry+2*renew; elapsed += renew {
		step(renew, a, b)
		if bOut == 0 && !slices.Contains(b.live(), "confirmer-b") {
			bOut = elapsed
		}
		if aDropsB == 0 && !slices.Contains(a.live(), "confirmer-b") {
			aDropsB = elapsed
		}
	}
	if bOut == 0 || aDropsB == 0 || bOut > fence+renew || aDropsB < expiry {
		t.Fatalf("b dropped itself after %s and a dropped b after %s: want b by the fence (%s), a not before the expiry (%s)", bOut, aDropsB, fence, expiry)
	}
	want(t, b) // it no longer trusts what it last read of a either
	want(t, a, "confirmer-a")

	// b is back: it renews, counts a at once and itself after a new warm-up and a's next
	// entry, the first to acknowledge it (a writes before it applies the set with b).
	bLink.down.Store(false)
	step(renew, b, a)
	want(t, b, "confirmer-a")
	want(t, a, "confirmer-a", "confirmer-b")
	step(warmup, b, a)
	want(t, b, "confirmer-a")
	step(renew, b, a)
	want(t, b, "confirmer-a", "confirmer-b")
}

// TestOptionsRefuseAFenceTooLong: a replica must always drop itself before the others may
// count it dead.
func TestOptionsRefuseAFenceTooLong(t *testing.T) {
	o := Options{Namespace: "agents", Name: "l", Identity: "a", Renew: 2 * time.Second, Fence: 17 * time.Second, Expiry: 20 * time.Second}
	if err := o.defaults(); err == nil {
		t.Fatal("a fence of 17 s with 2 s renewals and a 20 s expiry was accepted")
	}
	o = Options{Namespace: "agents", Name: "l", Identity: "a"}
	if err := o.defaults(); err != nil || o.Renew != DefaultRenew || o.Expiry != DefaultExpiry || o.Fence != DefaultFence || o.Warmup != 2*DefaultRenew {
		t.Fatalf("defaults %+v %v", o, err)
	}
}

// recorder keeps each member's latest report, and the order in which reports came.
type recorder struct {
	mu     sync.Mutex
	latest map[string][]string
	log    []report
}

type report struct {
	by      string
	members []string
}

func (r *recorder) onChange(id string) func([]string) {
	return func(members []string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.latest[id] = members
		r.log = append(r.log, report{id, members})
	}
}

// first is the index of the first report by a member that leaves out another; -1 if none.
func (r *recorder) first(by, without string) int {
	return slices.IndexFunc(r.log, func(p report) bool { return p.by == by && !slices.Contains(p.members, without) })
}

func (r *recorder) get(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest[id]
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMembersOnAnAPIServer runs three members on a real API server, where their renewals
// race for one Lease (409 Conflict), under exactly the rights the SessionConfirmer's Role
// grants (get and update of the one Lease, create): all three come to count all three; one
// that stops leaves; one cut off drops itself before the last one drops it.
func TestMembersOnAnAPIServer(t *testing.T) {
	cfg := apiservertest.Start(t, false)
	admin := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	const ns, lease, sa = "agents", "coding-agents-confirmer", "coding-agents-confirmer"
	for _, obj := range []func() error{
		func() error {
			_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		},
		func() error { // the rules of the Role in controllers/confirmer_children.go
			_, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "update"}, ResourceNames: []string{lease}},
			}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}, metav1.CreateOptions{})
			return err
		},
	} {
		if err := obj(); err != nil {
			t.Fatal(err)
		}
	}
	asConfirmer := rest.CopyConfig(cfg)
	asConfirmer.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	leases := kubernetes.NewForConfigOrDie(asConfirmer).CoordinationV1()

	rec := &recorder{latest: map[string][]string{}}
	cLink := &cut{LeasesGetter: leases}
	var wg sync.WaitGroup
	start := func(id string, link coordinationv1client.LeasesGetter) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			// The expiry is long against the renewals: the others follow a member that leaves
			// because its entry goes, not because it ages. A renewal (bounded by Renew) gets a
			// quarter second against an API server shared with the other test packages.
			err := Run(ctx, Options{Leases: link, Namespace: ns, Name: lease, Identity: id,
				Renew: 250 * time.Millisecond, Fence: 2 * time.Second, Expiry: 8 * time.Second,
				OnChange: rec.onChange(id), Log: logr.Discard()})
			if err != nil {
				t.Error(err)
			}
		})
		return func() { cancel(); <-done }
	}
	stopA := start("confirmer-a", leases)
	stopB := start("confirmer-b", leases)
	stopC := start("confirmer-c", cLink)
	defer func() { stopA(); stopB(); stopC(); wg.Wait() }()

	all := []string{"confirmer-a", "confirmer-b", "confirmer-c"}
	waitFor(t, func() bool {
		return slices.Equal(rec.get("confirmer-a"), all) && slices.Equal(rec.get("confirmer-b"), all) && slices.Equal(rec.get("confirmer-c"), all)
	})

	// b leaves: its last report leaves itself out, and its entry is a tombstone when Run
	// returns.
	stopB()
	ac := []string{"confirmer-a", "confirmer-c"}
	if got := rec.get("confirmer-b"); !slices.Equal(got, ac) {
		t.Fatalf("b left reporting %v, want %v", got, ac)
	}
	if got := entryOf(t, admin.CoordinationV1(), ns, lease, "confirmer-b"); !parseEntry(got).left {
		t.Fatalf("b's entry is %q, not a tombstone", got)
	}
	waitFor(t, func() bool {
		return slices.Equal(rec.get("confirmer-a"), ac) && slices.Equal(rec.get("confirmer-c"), ac)
	})

	rec.mu.Lock()
	rec.log = nil
	rec.mu.Unlock()
	cLink.down.Store(true)
	waitFor(t, func() bool { return slices.Equal(rec.get("confirmer-a"), []string{"confirmer-a"}) })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if cOut, aDropsC := rec.first("confirmer-c", "confirmer-c"), rec.first("confirmer-a", "confirmer-c"); cOut < 0 || cOut > aDropsC {
		t.Fatalf("the cut-off replica did not drop itself before the other dropped it: %+v", rec.log)
	}
}
