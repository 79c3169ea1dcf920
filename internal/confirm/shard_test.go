package confirm

import (
	"fmt"
	"testing"
	"time"
)

func sessionIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("sesn_%04d", i)
	}
	return ids
}

// TestShardSpreadsAndMovesLittle: replicas that see the same members agree on every owner;
// each of N members owns about 1/N of the sessions; a member that joins takes sessions only
// from the others, and one that leaves hands over only its own.
func TestShardSpreadsAndMovesLittle(t *testing.T) {
	ids := sessionIDs(6000)
	a, b := NewShard("confirmer-7d9f-a"), NewShard("confirmer-7d9f-b")
	three := []string{"confirmer-7d9f-a", "confirmer-7d9f-b", "confirmer-7d9f-c"}
	a.Set(three)
	b.Set([]string{"confirmer-7d9f-c", "confirmer-7d9f-b", "confirmer-7d9f-a", "confirmer-7d9f-b"}) // order and repeats do not matter
	owners := map[string]string{}
	count := map[string]int{}
	for _, id := range ids {
		o := a.Owner(id)
		if o != b.Owner(id) {
			t.Fatalf("%s: replicas disagree: %s and %s", id, o, b.Owner(id))
		}
		if a.Owns(id) != (o == "confirmer-7d9f-a") || b.Owns(id) != (o == "confirmer-7d9f-b") {
			t.Fatalf("%s: Owns disagrees with Owner %s", id, o)
		}
		owners[id] = o
		count[o]++
	}
	for _, m := range three {
		if n := count[m]; n < len(ids)/3*85/100 || n > len(ids)/3*115/100 {
			t.Errorf("%s owns %d of %d sessions, want about a third: %v", m, n, len(ids), count)
		}
	}

	a.Set(append(three, "confirmer-7d9f-d"))
	moved := 0
	for _, id := range ids {
		if o := a.Owner(id); o != owners[id] {
			if o != "confirmer-7d9f-d" {
				t.Fatalf("%s moved from %s to %s when d joined", id, owners[id], o)
			}
			moved++
		}
	}
	if moved < len(ids)/4*85/100 || moved > len(ids)/4*115/100 {
		t.Errorf("d took %d of %d sessions, want about a quarter", moved, len(ids))
	}

	a.Set([]string{"confirmer-7d9f-a", "confirmer-7d9f-c"})
	for _, id := range ids {
		if o := a.Owner(id); owners[id] != "confirmer-7d9f-b" && o != owners[id] {
			t.Fatalf("%s moved from %s to %s when b left", id, owners[id], o)
		}
	}
	if a.Set(nil); a.Owner(ids[0]) != "" || a.Owns(ids[0]) {
		t.Fatal("with no members a session has no owner")
	}
	var none *Shard
	if !none.Owns(ids[0]) || none.Changed() != nil || none.Members() != nil {
		t.Fatal("a nil Shard owns every session")
	}
}

// TestShardSetWaitsForMovedPasses: Set returns only after the passes of the sessions it moves
// away have ended; passes of sessions that stay do not hold it up, and none of the moved
// sessions can start another pass.
func TestShardSetWaitsForMovedPasses(t *testing.T) {
	s := NewShard("a")
	changed := s.Changed()
	s.Set([]string{"a"})
	select {
	case <-changed:
	default:
		t.Fatal("Set did not signal the change")
	}
	ids := sessionIDs(200)
	var moving, staying string
	probe := NewShard("a")
	probe.Set([]string{"a", "b"})
	for _, id := range ids {
		if probe.Owns(id) && staying == "" {
			staying = id
		}
		if !probe.Owns(id) && moving == "" {
			moving = id
		}
	}
	releaseMoving, ok := s.acquire(moving)
	if !ok {
		t.Fatal("a sole member must own every session")
	}
	releaseStaying, _ := s.acquire(staying)
	defer releaseStaying()

	done := make(chan struct{})
	go func() { s.Set([]string{"a", "b"}); close(done) }()
	// Set has swapped the members before it waits: a new pass of the moving session is refused.
	for s.Owns(moving) {
		time.Sleep(time.Millisecond)
	}
	if _, ok := s.acquire(moving); ok {
		t.Fatal("a moved session started a pass")
	}
	select {
	case <-done:
		t.Fatal("Set returned while a pass of a moved session was running")
	default:
	}
	releaseMoving()
	<-done // the staying session's pass is still running: it does not hold Set up

	s.Set([]string{"a", "b"}) // no change: returns at once
}
