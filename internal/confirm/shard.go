package confirm

import (
	"errors"
	"hash/fnv"
	"slices"
	"sync"
)

// ErrNotOwned is returned for a session another replica answers.
var ErrNotOwned = errors.New("the session belongs to another replica")

// Shard is this replica's part of the sessions when several replicas share them. A session
// belongs to the live member that ranks highest for it by rendezvous (highest random weight)
// hashing: replicas that see the same members agree on every owner without talking, and a
// member that joins or leaves moves only the sessions it takes or held, about 1/N of them.
//
// Every answering pass runs under acquire, and Set returns only once the passes of the
// sessions it moved away have finished, so a membership change never has two replicas
// answering one session as long as the new owner starts after the old one's Set (the order
// the members Lease keeps: internal/confirm/membership). A nil *Shard owns every session.
type Shard struct {
	self string

	mu       sync.Mutex
	released *sync.Cond
	members  []string
	seeds    []uint64
	inflight map[string]int // answering passes running, by session
	changed  chan struct{}
}

// NewShard returns the shard of the member self; it owns nothing until Set names self.
func NewShard(self string) *Shard {
	s := &Shard{self: self, inflight: map[string]int{}, changed: make(chan struct{})}
	s.released = sync.NewCond(&s.mu)
	return s
}

// Set replaces the live members. It returns once no answering pass is running for a session
// that the new members give to another replica; passes starting after it see the new members.
func (s *Shard) Set(members []string) {
	members = slices.Compact(slices.Sorted(slices.Values(members)))
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(members, s.members) {
		return
	}
	s.members = members
	s.seeds = make([]uint64, len(members))
	for i, m := range members {
		s.seeds[i] = hashString(m)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	for s.movedAwayLocked() {
		s.released.Wait()
	}
}

func (s *Shard) movedAwayLocked() bool {
	for id := range s.inflight {
		if s.ownerLocked(id) != s.self {
			return true
		}
	}
	return false
}

// Members are the live members, sorted.
func (s *Shard) Members() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.members)
}

// Changed is closed by the next Set that changes the members; nil (never ready) on a nil Shard.
func (s *Shard) Changed() <-chan struct{} {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Owns reports whether this replica answers the session now.
func (s *Shard) Owns(session string) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownerLocked(session) == s.self
}

// Owner is the member that answers the session; "" when there are no members. s is not nil.
func (s *Shard) Owner(session string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownerLocked(session)
}

// acquire starts an answering pass of a session this replica owns; release ends it. It
// reports false, and starts nothing, for a session it does not own.
func (s *Shard) acquire(session string) (release func(), owned bool) {
	if s == nil {
		return func() {}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ownerLocked(session) != s.self {
		return nil, false
	}
	s.inflight[session]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.inflight[session]--; s.inflight[session] == 0 {
			delete(s.inflight, session)
		}
		s.released.Broadcast()
	}, true
}

// Acquire is acquire for the ToolApproval watch (approvals.Shard), whose keys are approval
// names.
func (s *Shard) Acquire(key string) (release func(), owned bool) {
	return s.acquire(key)
}

// ownerLocked ranks the members for the session: the weight of a member is a 64-bit mix of
// its hash and the session's, the highest weight wins, and the lower name breaks a tie.
func (s *Shard) ownerLocked(session string) string {
	h := hashString(session)
	best, owner := uint64(0), ""
	for i, m := range s.members {
		if w := mix64(s.seeds[i] ^ h); owner == "" || w > best {
			best, owner = w, m
		}
	}
	return owner
}

func hashString(v string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(v)) // a hash.Hash never fails to write
	return h.Sum64()
}

// mix64 is MurmurHash3's 64-bit finalizer: every input bit flips each output bit with
// probability about one half, so the weights of one session across members are unrelated.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
