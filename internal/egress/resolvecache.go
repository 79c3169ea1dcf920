package egress

import (
	"context"
	"sync"
	"time"
)

// CachingResolver shares lookups between the policies that allow the same host: the host is
// looked up once per TTL, not once per policy, and concurrent lookups of it wait for one
// answer. Records come back with the TTL they have left, so every policy resolves again when
// the shared answer expires, as a caching stub resolver would. Failures and empty answers are
// not cached.
type CachingResolver struct {
	Resolver Resolver
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	mu        sync.Mutex
	entries   map[string]*cachedLookup
	lastPrune time.Time
}

type cachedLookup struct {
	done    chan struct{} // closed once the fields below are set
	records []Record
	err     error
	at      time.Time // when the answer came
	expires time.Time
}

// pruneEvery is how often answers that expired are dropped.
const pruneEvery = time.Minute

// Resolve implements Resolver.
func (c *CachingResolver) Resolve(ctx context.Context, host string) ([]Record, error) {
	c.mu.Lock()
	now := c.now()
	if c.entries == nil {
		c.entries = map[string]*cachedLookup{}
	}
	e := c.entries[host]
	if e != nil {
		select {
		case <-e.done:
			if e.err != nil || !now.Before(e.expires) {
				e = nil
			}
		default: // in flight: share it
		}
	}
	if e == nil {
		e = &cachedLookup{done: make(chan struct{})}
		c.entries[host] = e
		c.prune(now)
		c.mu.Unlock()
		c.lookup(ctx, host, e)
	} else {
		c.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if e.err != nil {
		return nil, e.err
	}
	elapsed := c.now().Sub(e.at)
	out := make([]Record, len(e.records))
	for i, r := range e.records {
		out[i] = Record{Addr: r.Addr, TTL: max(r.TTL-elapsed, 0)}
	}
	return out, nil
}

func (c *CachingResolver) lookup(ctx context.Context, host string, e *cachedLookup) {
	defer close(e.done)
	e.records, e.err = c.Resolver.Resolve(ctx, host)
	e.at = c.now()
	e.expires = e.at // an empty answer is not kept
	for i, r := range e.records {
		if i == 0 || e.at.Add(r.TTL).Before(e.expires) {
			e.expires = e.at.Add(r.TTL)
		}
	}
}

// prune drops the answers that expired, at most every pruneEvery; c.mu is held.
func (c *CachingResolver) prune(now time.Time) {
	if now.Sub(c.lastPrune) < pruneEvery {
		return
	}
	c.lastPrune = now
	for host, e := range c.entries {
		select {
		case <-e.done:
			if !now.Before(e.expires) {
				delete(c.entries, host)
			}
		default:
		}
	}
}

func (c *CachingResolver) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
