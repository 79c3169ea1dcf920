package confirm

import (
	"context"
	"errors"
	"sync"
)

// Queue feeds sessions to be answered (from webhooks) to a bounded set of workers; a session
// already queued is not queued twice. When replicas share the sessions, the replica that
// receives a webhook answers only its own sessions; the owner sees the same pause on its
// stream.
type Queue struct {
	Confirmer *Confirmer

	ch     chan string
	mu     sync.Mutex
	queued map[string]bool
}

// NewQueue returns a queue holding at most size sessions.
func NewQueue(c *Confirmer, size int) *Queue {
	return &Queue{Confirmer: c, ch: make(chan string, size), queued: map[string]bool{}}
}

// ErrQueueFull is returned when the queue cannot take another session.
var ErrQueueFull = errors.New("the answering queue is full")

// Add queues a session; it never blocks.
func (q *Queue) Add(id string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued[id] {
		return nil
	}
	select {
	case q.ch <- id:
		q.queued[id] = true
		return nil
	default:
		return ErrQueueFull
	}
}

// Run answers queued sessions with n workers until ctx ends; in-flight answers finish.
func (q *Queue) Run(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case id := <-q.ch:
					q.mu.Lock()
					delete(q.queued, id)
					q.mu.Unlock()
					actx, cancel := detached(ctx)
					switch _, err := q.Confirmer.AnswerSession(actx, id); {
					case errors.Is(err, ErrNotOwned):
						// Another replica owns it and answers it from its stream.
						q.Confirmer.Log.V(1).Info("webhook for a session of another replica", "session", id)
					case err != nil:
						q.Confirmer.Log.Error(err, "answering session from webhook", "session", id)
					}
					cancel()
				}
			}
		}()
	}
	wg.Wait()
}
