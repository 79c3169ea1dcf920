package egress

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingResolver answers every host with one address and the TTL set, after release is
// closed (nil answers at once), and counts its lookups.
type countingResolver struct {
	lookups atomic.Int32
	ttl     time.Duration
	err     error
	release chan struct{}
}

func (r *countingResolver) Resolve(_ context.Context, _ string) ([]Record, error) {
	r.lookups.Add(1)
	if r.release != nil {
		<-r.release
	}
	if r.err != nil {
		return nil, r.err
	}
	return []Record{{Addr: netip.MustParseAddr("192.0.2.1"), TTL: r.ttl}}, nil
}

func TestCachingResolverSharesOneLookupPerTTL(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	inner := &countingResolver{ttl: 30 * time.Second, release: make(chan struct{})}
	c := &CachingResolver{Resolver: inner, Now: func() time.Time { return now }}

	// Concurrent lookups of one host wait for one answer.
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if recs, err := c.Resolve(context.Background(), "api.example"); err != nil || len(recs) != 1 || recs[0].TTL != 30*time.Second {
				t.Errorf("records %v, error %v", recs, err)
			}
		})
	}
	for inner.lookups.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(inner.release)
	wg.Wait()
	if n := inner.lookups.Load(); n != 1 {
		t.Fatalf("%d lookups for 20 concurrent callers", n)
	}

	// Later callers get what is left of the TTL, and a new lookup once it ran out.
	now = now.Add(20 * time.Second)
	if recs, _ := c.Resolve(context.Background(), "api.example"); recs[0].TTL != 10*time.Second || inner.lookups.Load() != 1 {
		t.Fatalf("20 s later: TTL %s after %d lookups, want 10s after 1", recs[0].TTL, inner.lookups.Load())
	}
	now = now.Add(10 * time.Second)
	if recs, _ := c.Resolve(context.Background(), "api.example"); recs[0].TTL != 30*time.Second || inner.lookups.Load() != 2 {
		t.Fatalf("at expiry: TTL %s after %d lookups, want a fresh 30s after 2", recs[0].TTL, inner.lookups.Load())
	}
}

func TestCachingResolverDoesNotCacheFailures(t *testing.T) {
	inner := &countingResolver{err: errors.New("no such host")}
	c := &CachingResolver{Resolver: inner}
	for range 3 {
		if _, err := c.Resolve(context.Background(), "gone.example"); err == nil {
			t.Fatal("a failed lookup answered")
		}
	}
	if n := inner.lookups.Load(); n != 3 {
		t.Fatalf("%d lookups for 3 calls: a failure was cached", n)
	}
}
