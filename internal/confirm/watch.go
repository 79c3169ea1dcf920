package confirm

import (
	"context"
	"sync"
	"time"

	"github.com/intutic/gate-operator/internal/anthropic"
)

// Reconnect backoff of a session stream: from 0.5 s, doubling to 10 s, reset by any event.
const (
	minReconnect = 500 * time.Millisecond
	maxReconnect = 10 * time.Second
)

// Watcher discovers the active sessions of the configured agents and keeps each one answered:
// it streams up to MaxStreams sessions at a time, re-lists after every (re)connect, and polls
// the rest (and every session, as a safety net) each PollInterval.
type Watcher struct {
	Confirmer    *Confirmer
	AgentIDs     []string
	PollInterval time.Duration
	// IdleTimeout drops a stream that sends nothing, not even a ping, for that long.
	IdleTimeout time.Duration
	// MaxStreams bounds the concurrent streams.
	MaxStreams int
	// OnReconnect is called for every stream reconnect (metrics).
	OnReconnect func()

	mu       sync.Mutex
	watching map[string]bool
	streams  int
	wg       sync.WaitGroup
}

// Run watches until ctx ends, then waits for every session watch to finish.
func (w *Watcher) Run(ctx context.Context) error {
	if w.PollInterval <= 0 {
		w.PollInterval = 10 * time.Second
	}
	if w.IdleTimeout <= 0 {
		w.IdleTimeout = 90 * time.Second
	}
	if w.MaxStreams <= 0 {
		w.MaxStreams = 256
	}
	w.watching = map[string]bool{}
	defer w.wg.Wait()
	ticker := time.NewTicker(w.PollInterval)
	defer ticker.Stop()
	for {
		w.discover(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// discover lists the running and idle sessions of each agent; new ones are streamed when a
// stream slot is free, and the others are answered by this poll.
func (w *Watcher) discover(ctx context.Context) {
	log := w.Confirmer.Log
	for _, agent := range w.AgentIDs {
		sessions, err := w.Confirmer.Client.ListSessions(ctx, anthropic.ListSessionsParams{AgentID: agent, Statuses: []string{"running", "idle", "rescheduling"}, Limit: 100})
		if err != nil {
			if ctx.Err() == nil {
				log.Error(err, "listing sessions", "agent", agent)
			}
			continue
		}
		for _, s := range sessions {
			if w.startWatch(ctx, s.ID) {
				continue
			}
			actx, cancel := detached(ctx)
			_, err := w.Confirmer.AnswerSession(actx, s.ID)
			cancel()
			if err != nil && ctx.Err() == nil {
				log.Error(err, "answering session", "session", s.ID)
			}
		}
	}
}

// startWatch starts streaming a session if it is not watched yet and a slot is free. It
// reports whether the session is (now) watched.
func (w *Watcher) startWatch(ctx context.Context, id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watching[id] {
		return true
	}
	if w.streams >= w.MaxStreams {
		return false
	}
	w.watching[id] = true
	w.streams++
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.watch(ctx, id)
		w.mu.Lock()
		delete(w.watching, id)
		w.streams--
		w.mu.Unlock()
		w.Confirmer.Forget(id)
	}()
	return true
}

// watch streams one session until it ends, reconnecting with backoff.
func (w *Watcher) watch(ctx context.Context, id string) {
	log := w.Confirmer.Log.WithValues("session", id)
	backoff := minReconnect
	for ctx.Err() == nil {
		ended, gotEvent, err := w.streamOnce(ctx, id)
		if ended || ctx.Err() != nil {
			return
		}
		if anthropic.IsFatal4xx(err) {
			log.Error(err, "stopping the watch of the session")
			return
		}
		if gotEvent {
			backoff = minReconnect
		}
		log.V(1).Info("reconnecting the session stream", "after", backoff, "error", errString(err))
		if w.OnReconnect != nil {
			w.OnReconnect()
		}
		if anthropic.SleepContext(ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, maxReconnect)
	}
}

// streamOnce opens the stream, answers what the history holds (events emitted between
// connecting and listing arrive on the stream, and duplicates are harmless), then answers
// each streamed tool use as it arrives, lists again when an idle names a call it has not
// seen, and answers again every PollInterval and when a held Ask reaches its deadline.
// The watch goroutine itself reads the stream; the timers run their passes in the timer's
// goroutine, so an idle watched session costs one goroutine of ours.
func (w *Watcher) streamOnce(ctx context.Context, id string) (ended, gotEvent bool, err error) {
	stream, err := w.Confirmer.Client.StreamEvents(ctx, id, w.IdleTimeout)
	if err != nil {
		return false, false, err
	}
	var (
		mu       sync.Mutex
		closed   bool
		deadline *time.Timer
		poll     *time.Timer
	)
	// fail ends the stream after a failed pass, so the loop reconnects and lists again.
	fail := func(err error) {
		w.Confirmer.Log.Error(err, "answering session", "session", id)
		stream.Close()
	}
	var answer func() error
	schedule := func(out Outcome) {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return
		}
		if deadline != nil {
			deadline.Stop()
			deadline = nil
		}
		if !out.NextDeadline.IsZero() {
			deadline = time.AfterFunc(max(time.Until(out.NextDeadline), 0), func() {
				if err := answer(); err != nil {
					fail(err)
				}
			})
		}
	}
	answer = func() error {
		actx, cancel := detached(ctx)
		defer cancel()
		out, err := w.Confirmer.AnswerSession(actx, id)
		schedule(out)
		return err
	}
	defer func() {
		mu.Lock()
		closed = true
		if deadline != nil {
			deadline.Stop()
		}
		if poll != nil {
			poll.Stop()
		}
		mu.Unlock()
		stream.Close()
	}()
	if err := answer(); err != nil {
		return false, false, err
	}
	mu.Lock()
	poll = time.AfterFunc(w.PollInterval, func() {
		if err := answer(); err != nil {
			fail(err)
			return
		}
		mu.Lock()
		if !closed {
			poll.Reset(w.PollInterval)
		}
		mu.Unlock()
	})
	mu.Unlock()

	for {
		ev, err := stream.Next()
		if err != nil {
			if ctx.Err() != nil {
				return false, gotEvent, ctx.Err()
			}
			return false, gotEvent, err
		}
		gotEvent = true
		switch ev.Type {
		case anthropic.TypeStatusTerminated, anthropic.TypeDeleted:
			return true, true, nil
		case anthropic.TypeToolUse, anthropic.TypeMCPToolUse, anthropic.TypeStatusIdle, anthropic.TypeToolConfirmation:
			actx, cancel := detached(ctx)
			needList, out, err := w.Confirmer.AnswerEvent(actx, id, ev)
			cancel()
			if err == nil {
				schedule(out)
				if needList {
					err = answer()
				}
			}
			if err != nil {
				return false, true, err
			}
		}
	}
}

// detached is ctx without its cancellation, bounded to a minute: a shutdown lets an answering
// pass that has started finish its confirmations, and the loop stops after it.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
