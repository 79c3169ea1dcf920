package confirm

import (
	"context"
	"errors"
	"math/rand/v2"
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
// the rest (and every session, as a safety net) about each PollInterval. With a Shard on the
// Confirmer it watches only this replica's sessions, and follows every membership change at
// once: it stops the streams of the sessions that moved away and starts those that moved in.
type Watcher struct {
	Confirmer    *Confirmer
	AgentIDs     []string
	PollInterval time.Duration
	// IdleTimeout drops a stream that sends nothing, not even a ping, for that long.
	IdleTimeout time.Duration
	// MaxStreams bounds the concurrent streams (2048 when zero).
	MaxStreams int
	// OnReconnect is called for every stream reconnect (metrics).
	OnReconnect func()

	mu       sync.Mutex
	watching map[string]context.CancelFunc // the streamed sessions, and how to stop each
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
		w.MaxStreams = 2048
	}
	w.watching = map[string]context.CancelFunc{}
	defer w.wg.Wait()
	ticker := time.NewTicker(w.PollInterval)
	defer ticker.Stop()
	shard := w.Confirmer.Shard
	for {
		changed := shard.Changed() // before discovering, so a change during it is not missed
		w.discover(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-changed:
			w.stopMovedAway()
		}
	}
}

// stopMovedAway stops the streams of the sessions this replica no longer owns. Their passes
// have finished (Shard.Set waited for them), and none starts again (ErrNotOwned).
func (w *Watcher) stopMovedAway() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, stop := range w.watching {
		if !w.Confirmer.Shard.Owns(id) {
			stop()
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
			if !w.Confirmer.Shard.Owns(s.ID) || w.startWatch(ctx, s.ID) {
				continue
			}
			actx, cancel := detached(ctx)
			_, err := w.Confirmer.AnswerSession(actx, s.ID)
			cancel()
			if err != nil && !errors.Is(err, ErrNotOwned) && ctx.Err() == nil {
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
	if w.watching[id] != nil {
		return true
	}
	if len(w.watching) >= w.MaxStreams {
		return false
	}
	wctx, stop := context.WithCancel(ctx)
	w.watching[id] = stop
	w.setStreamed(len(w.watching))
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.watch(wctx, id)
		stop()
		// Forgotten before the slot is freed: a new watch of the session (it moved back, or
		// reappeared) starts from the history, never beside this one's state.
		w.Confirmer.Forget(id)
		w.mu.Lock()
		delete(w.watching, id)
		w.setStreamed(len(w.watching))
		w.mu.Unlock()
	}()
	return true
}

func (w *Watcher) setStreamed(n int) {
	if m := w.Confirmer.Metrics; m != nil {
		m.Streamed.Set(float64(n))
	}
}

// watch streams one session until it ends or moves to another replica, reconnecting with
// backoff.
func (w *Watcher) watch(ctx context.Context, id string) {
	log := w.Confirmer.Log.WithValues("session", id)
	backoff := minReconnect
	for ctx.Err() == nil && w.Confirmer.Shard.Owns(id) {
		ended, gotEvent, err := w.streamOnce(ctx, id)
		if ended || ctx.Err() != nil || errors.Is(err, ErrNotOwned) {
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
// seen, and answers again about every PollInterval and when a held Ask reaches its deadline.
// The watch goroutine itself reads the stream; the timers run their passes in the timer's
// goroutine, so an idle watched session costs one goroutine of ours (and one of the HTTP/2
// transport's, for the stream's request).
func (w *Watcher) streamOnce(ctx context.Context, id string) (ended, gotEvent bool, err error) {
	stream, err := w.Confirmer.Client.StreamEvents(ctx, id, w.IdleTimeout)
	if err != nil {
		return false, false, err
	}
	p := &passes{w: w, ctx: ctx, id: id, stream: stream}
	defer p.close()
	if err := p.answer(); err != nil {
		return false, false, err
	}
	p.startPolling()
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
			if err := p.event(ev); err != nil {
				return false, true, err
			}
		}
	}
}

// passes are the answering passes of one open stream of a session: the stream's events, a
// poll about every PollInterval, and a pass when a held Ask reaches its deadline.
type passes struct {
	w      *Watcher
	ctx    context.Context
	id     string
	stream *anthropic.Stream

	mu       sync.Mutex
	closed   bool
	deadline *time.Timer
	poll     *time.Timer
	// timed are the passes the timers run; the stream is given up only after they end, so a
	// watch that returns has no pass of its session left running.
	timed sync.WaitGroup
}

// answer lists and answers the session, and schedules the next deadline.
func (p *passes) answer() error {
	actx, cancel := detached(p.ctx)
	defer cancel()
	out, err := p.w.Confirmer.AnswerSession(actx, p.id)
	p.schedule(out)
	return err
}

// event answers one streamed event, and lists when it names a call not seen.
func (p *passes) event(ev *anthropic.Event) error {
	actx, cancel := detached(p.ctx)
	needList, out, err := p.w.Confirmer.AnswerEvent(actx, p.id, *ev)
	cancel()
	if err != nil {
		return err
	}
	p.schedule(out)
	if needList {
		return p.answer()
	}
	return nil
}

// schedule arms the deadline timer for the earliest held Ask, if any.
func (p *passes) schedule(out Outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if p.deadline != nil {
		p.deadline.Stop()
		p.deadline = nil
	}
	if !out.NextDeadline.IsZero() {
		p.deadline = time.AfterFunc(max(out.NextDeadline.Sub(p.w.Confirmer.now()), 0), p.timer(func() {
			if err := p.answer(); err != nil {
				p.fail(err)
			}
		}))
	}
}

// startPolling answers the session again about every PollInterval, as a safety net.
func (p *passes) startPolling() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.poll = time.AfterFunc(jittered(p.w.PollInterval), p.timer(func() {
		if err := p.answer(); err != nil {
			p.fail(err)
			return
		}
		p.mu.Lock()
		if !p.closed {
			p.poll.Reset(jittered(p.w.PollInterval))
		}
		p.mu.Unlock()
	}))
}

// timer wraps a timer's pass: it does not run once the stream is being closed, and close
// waits for it when it has started.
func (p *passes) timer(pass func()) func() {
	return func() {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		p.timed.Add(1)
		p.mu.Unlock()
		defer p.timed.Done()
		pass()
	}
}

// fail ends the stream after a failed timer pass, so the loop reconnects and lists again (or
// stops, when the session moved to another replica).
func (p *passes) fail(err error) {
	if !errors.Is(err, ErrNotOwned) {
		p.w.Confirmer.Log.Error(err, "answering session", "session", p.id)
	}
	p.stream.Close()
}

// close stops the timers, closes the stream and waits for a timer pass under way.
func (p *passes) close() {
	p.mu.Lock()
	p.closed = true
	if p.deadline != nil {
		p.deadline.Stop()
	}
	if p.poll != nil {
		p.poll.Stop()
	}
	p.mu.Unlock()
	p.stream.Close()
	p.timed.Wait()
}

// jittered is d ± 25 %, at random: streams opened together (a restart, a membership change
// handing over a thousand sessions) do not all poll in the same instant.
func jittered(d time.Duration) time.Duration {
	return d*3/4 + time.Duration(rand.Int64N(int64(d)/2+1))
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
