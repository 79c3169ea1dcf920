package decisionlog

import (
	"encoding/json"
	"io"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// WriterOptions bound what one source (one process) writes.
type WriterOptions struct {
	// AllowRate and AllowBurst limit the Allow records written per second; an Allow over the
	// limit is dropped and counted. Zero: DefaultAllowRate and DefaultAllowBurst.
	AllowRate  float64
	AllowBurst int
	// Queue is how many records wait for the output; zero: DefaultQueue. Allow records use at
	// most half of it, so a stalled output leaves room for the others.
	Queue int
	// Registerer registers gate_decision_records_dropped_total; nil registers nothing.
	Registerer prometheus.Registerer
}

// Defaults of WriterOptions: an agent making a hundred allowed calls a second is recorded whole;
// past that, its Allow records are sampled by the limit and every other record is kept.
const (
	DefaultAllowRate  = 100
	DefaultAllowBurst = 200
	DefaultQueue      = 4096
)

// Drop classes (Dropped, and the metric's class label).
const (
	dropClassAllow = "allow"
	dropClassOther = "other"
)

// Writer writes records as NDJSON, one whole line per Write of its output, on a goroutine of
// its own, so a slow output (a stalled log pipeline) never holds a decision up. It is bounded:
// past the rate limit, or with the queue half full, Allow records are dropped; any other record
// is dropped only when the queue is full. Every drop is counted in the metric and in the
// Dropped field of the next record written, so none is lost silently.
type Writer struct {
	out     io.Writer
	queue   chan queued
	allow   *rate.Limiter
	dropped struct{ allow, other atomic.Int64 }
	metric  *prometheus.CounterVec
	// closing guards queue against a Write after Close (a request a shutdown timed out on):
	// Writes hold it shared, Close exclusively.
	closing sync.RWMutex
	closed  bool
	done    chan struct{}
}

// queued is a record to write, or a Flush's marker (flushed set).
type queued struct {
	rec     Record
	flushed chan struct{}
}

// NewWriter starts a Writer writing to out; Close stops it.
func NewWriter(out io.Writer, o WriterOptions) *Writer {
	if o.AllowRate == 0 {
		o.AllowRate = DefaultAllowRate
	}
	if o.AllowBurst == 0 {
		o.AllowBurst = DefaultAllowBurst
	}
	if o.Queue == 0 {
		o.Queue = DefaultQueue
	}
	w := &Writer{out: out, queue: make(chan queued, o.Queue), allow: rate.NewLimiter(rate.Limit(o.AllowRate), o.AllowBurst), done: make(chan struct{})}
	if o.Registerer != nil {
		w.metric = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gate_decision_records_dropped_total",
			Help: "Decision records this component dropped, by class: allow (over the rate limit of Allow records, or the queue half full), other (Ask, Block, fault and approval records, dropped only with the queue full). Each drop is also counted in the next record's dropped field.",
		}, []string{"class"})
		w.metric.WithLabelValues(dropClassAllow)
		w.metric.WithLabelValues(dropClassOther)
		o.Registerer.MustRegister(w.metric)
	}
	go w.run()
	return w
}

// Write queues rec for the output, or drops and counts it; it never blocks. A nil Writer drops
// every record uncounted; a closed one counts it dropped.
func (w *Writer) Write(rec Record) {
	if w == nil {
		return
	}
	w.closing.RLock()
	defer w.closing.RUnlock()
	if w.closed {
		w.drop(classOf(&rec))
		return
	}
	if rec.droppable() {
		if len(w.queue) >= cap(w.queue)/2 || !w.allow.Allow() {
			w.drop(dropClassAllow)
			return
		}
	}
	select {
	case w.queue <- queued{rec: rec}:
	default:
		w.drop(classOf(&rec))
	}
}

// classOf is the drop class of rec.
func classOf(rec *Record) string {
	if rec.droppable() {
		return dropClassAllow
	}
	return dropClassOther
}

func (w *Writer) drop(class string) {
	if class == dropClassAllow {
		w.dropped.allow.Add(1)
	} else {
		w.dropped.other.Add(1)
	}
	if w.metric != nil {
		w.metric.WithLabelValues(class).Inc()
	}
}

// Flush waits until every record queued before it is written. Unlike Write it blocks, on a
// stalled output too: for tests, and for callers that must see their records out.
func (w *Writer) Flush() {
	if w == nil {
		return
	}
	w.closing.RLock()
	if w.closed {
		w.closing.RUnlock()
		return
	}
	done := make(chan struct{})
	w.queue <- queued{flushed: done}
	w.closing.RUnlock()
	<-done
}

// Close writes what is queued and stops; a record written after it is counted dropped.
func (w *Writer) Close() {
	if w == nil {
		return
	}
	w.closing.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.closing.Unlock()
	<-w.done
}

func (w *Writer) run() {
	defer close(w.done)
	for q := range w.queue {
		if q.flushed != nil {
			close(q.flushed)
			continue
		}
		rec := q.rec
		if a, o := w.dropped.allow.Swap(0), w.dropped.other.Swap(0); a+o > 0 {
			rec.Dropped = &Dropped{Allow: a, Other: o}
		}
		line, err := json.Marshal(&rec)
		if err != nil { // a Record always marshals; count it rather than lose it silently
			w.drop(dropClassOther)
			continue
		}
		_, _ = w.out.Write(append(line, '\n'))
	}
}
