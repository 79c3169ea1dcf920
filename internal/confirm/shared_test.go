package confirm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/testutil"
)

// replica is one confirmer replica of a test: its shard, confirmer, watcher and webhook
// queue, running until stopped.
type replica struct {
	name      string
	shard     *Shard
	confirmer *Confirmer
	queue     *Queue
	decided   decisionlog.Memory // the calls this replica decided
	cancel    context.CancelFunc
	done      chan struct{}
}

func startReplica(t *testing.T, f *anthropictest.Server, name string, members []string) *replica {
	t.Helper()
	r := &replica{name: name, shard: NewShard(name), done: make(chan struct{})}
	r.shard.Set(members)
	r.confirmer = newConfirmer(t, f)
	r.confirmer.Shard = r.shard
	r.confirmer.Decisions = decisionlog.New(nil, decisionlog.Source{}, nil, &r.decided)
	r.queue = NewQueue(r.confirmer, 64)
	w := &Watcher{Confirmer: r.confirmer, AgentIDs: []string{"agent_1"}, PollInterval: 100 * time.Millisecond, IdleTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		var wg sync.WaitGroup
		wg.Go(func() { r.queue.Run(ctx, 2) })
		if err := w.Run(ctx); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		wg.Wait()
	}()
	return r
}

// stop ends the replica's loops and waits for them.
func (r *replica) stop() {
	r.cancel()
	<-r.done
}

// TestMembershipChangesMidStream: three replicas share 24 sessions while an agent keeps
// pausing on calls and webhooks name sessions at random on every replica; a replica joins, one
// leaves gracefully, one dies, all mid-stream, in the order the members Lease keeps
// (internal/confirm/membership). The fake records a second confirmation of a call instead of
// refusing it, so the test sees every confirmation sent: each call is confirmed exactly once,
// and every replica took its share.
func TestMembershipChangesMidStream(t *testing.T) {
	f := newFake(t)
	f.AcceptDuplicateConfirmations(true)
	ids := sessionIDs(24)
	for _, id := range ids {
		f.AddSession(id, "agent_1")
	}
	ab, abc := []string{"a", "b"}, []string{"a", "b", "c"}
	a, b := startReplica(t, f, "a", ab), startReplica(t, f, "b", ab)
	replicas := []*replica{a, b}
	var mu sync.Mutex
	calls := map[string][]string{}

	// The agent: a call every millisecond or so in a random session, and now and then a
	// webhook for a random session to a random replica, until stopped.
	stopAgent := make(chan struct{})
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		for i := 0; ; i++ {
			select {
			case <-stopAgent:
				return
			default:
			}
			id := ids[rand.IntN(len(ids))]
			got := f.AddCalls(id, anthropictest.ToolUse{Name: "read", Input: map[string]any{"file_path": fmt.Sprint(i)}, Permission: "ask"})
			mu.Lock()
			calls[id] = append(calls[id], got...)
			if i%5 == 0 {
				// A full queue drops the webhook; the owner's stream answers anyway.
				_ = replicas[rand.IntN(len(replicas))].queue.Add(ids[rand.IntN(len(ids))])
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	confirmedBy := func(r *replica) func() bool {
		from := r.decided.Len()
		return func() bool { return r.decided.Len() >= from+20 }
	}

	// c joins: the others let go of its sessions first, then it takes them.
	testutil.WaitFor(t, confirmedBy(a))
	a.shard.Set(abc)
	b.shard.Set(abc)
	c := startReplica(t, f, "c", abc)
	mu.Lock()
	replicas = append(replicas, c)
	mu.Unlock()
	testutil.WaitFor(t, confirmedBy(c))

	// a leaves gracefully: it drops itself (Set waits for its passes), stops, and only then do
	// the others take its sessions.
	a.shard.Set([]string{"b", "c"})
	mu.Lock()
	replicas = []*replica{b, c}
	mu.Unlock()
	a.stop()
	b.shard.Set([]string{"b", "c"})
	c.shard.Set([]string{"b", "c"})
	testutil.WaitFor(t, confirmedBy(b))

	// b dies without handing over: nothing answers its sessions until c counts it dead, and
	// its process is long gone by then (modelled by waiting for its last pass to end).
	mu.Lock()
	replicas = []*replica{c}
	mu.Unlock()
	b.stop()
	b.shard.Set(nil)
	c.shard.Set([]string{"c"})
	testutil.WaitFor(t, confirmedBy(c))

	close(stopAgent)
	<-agentDone
	for _, id := range ids {
		testutil.WaitFor(t, func() bool { return len(f.Pending(id)) == 0 })
	}
	c.stop()

	total := 0
	for _, id := range ids {
		got := confirmations(t, f, id) // fails on a call confirmed twice
		for _, call := range calls[id] {
			if _, ok := got[call]; !ok {
				t.Errorf("%s: call %s was never confirmed", id, call)
			}
		}
		total += len(calls[id])
	}
	for _, r := range []*replica{a, b, c} {
		if r.decided.Len() == 0 {
			t.Errorf("replica %s confirmed nothing", r.name)
		}
	}
	t.Logf("%d calls; confirmed by a %d, b %d, c %d", total, a.decided.Len(), b.decided.Len(), c.decided.Len())
}
