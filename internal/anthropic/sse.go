package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// SSE limits: a line, and the data of one event.
const (
	MaxSSELine  = 1 << 20
	MaxSSEEvent = 4 << 20
)

// ErrStreamIdle is returned when a stream stays silent (not even a ping) past its idle timeout.
var ErrStreamIdle = errors.New("anthropic API: the event stream was silent past its idle timeout")

// sseMessage is one dispatched SSE message: only event and data are kept.
type sseMessage struct {
	event string
	data  string
}

// sseReader parses text/event-stream as the SDK does (specs §4.1): lines end at \n, \r\n or
// a lone \r; a leading BOM is dropped; ':' lines are comments; field:value splits at the
// first colon and drops one leading space; only event and data are kept; data lines join with
// \n; a blank line ends a message; what is left at EOF is flushed.
//
// Reading and parsing are apart: parse consumes only what is buffered, and fill is the one
// call that waits for the body. A stream's goroutine spends its life parked in fill, so the
// frames above the body's Read are kept few and small: with thousands of sessions streamed,
// they decide whether each goroutine's stack stays at 4 KiB or doubles.
type sseReader struct {
	r   io.Reader
	buf []byte // read and not yet parsed: buf[pos:]
	pos int
	err error // the body's read error (io.EOF at its end), once it came

	// the message being read
	event    string
	hasName  bool
	hasField bool
	data     []byte
	dataN    int
}

// sseBufSize is a stream's read buffer to begin with, and what it returns to after an event
// larger than that: thousands of streams may be open.
const sseBufSize = 1 << 10

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: r, buf: make([]byte, 0, sseBufSize)}
}

// next returns the next complete message, or io.EOF (or the body's read error) at the end.
func (r *sseReader) next() (sseMessage, error) {
	for {
		if msg, ok, err := r.parse(); ok || err != nil {
			return msg, err
		}
		r.fill()
	}
}

// fill reads once from the body into the buffer and returns how many bytes came. After the
// body's error it reads no more.
func (r *sseReader) fill() int {
	if r.err != nil {
		return 0
	}
	if r.pos > 0 { // drop what was parsed; after a large event, go back to a small buffer
		rest := r.buf[r.pos:]
		if cap(r.buf) > sseBufSize && len(rest) < sseBufSize/2 {
			r.buf = append(make([]byte, 0, sseBufSize), rest...)
		} else {
			r.buf = r.buf[:copy(r.buf, rest)]
		}
		r.pos = 0
	}
	if len(r.buf) == cap(r.buf) {
		r.buf = append(r.buf, make([]byte, len(r.buf))...)[:len(r.buf)]
	}
	n, err := r.r.Read(r.buf[len(r.buf):cap(r.buf)])
	r.buf = r.buf[:len(r.buf)+n]
	if err != nil {
		r.err = err
	}
	return n
}

// parse consumes the buffered lines until a message is complete (ok), more input is needed
// (not ok, no error), or the body ended: then it flushes a message left at EOF and afterwards
// returns the body's error (io.EOF at a clean end).
func (r *sseReader) parse() (msg sseMessage, ok bool, err error) {
	for {
		advance, line, _ := splitSSELines(r.buf[r.pos:], r.err != nil)
		if advance == 0 {
			switch {
			case r.err == nil && len(r.buf)-r.pos > MaxSSELine:
				return sseMessage{}, false, fmt.Errorf("anthropic API: a stream line is longer than %d bytes", MaxSSELine)
			case r.err == nil:
				return sseMessage{}, false, nil
			case r.err == io.EOF && r.hasField:
				return r.flush(), true, nil
			}
			return sseMessage{}, false, r.err
		}
		r.pos += advance
		if len(line) > MaxSSELine {
			return sseMessage{}, false, fmt.Errorf("anthropic API: a stream line is longer than %d bytes", MaxSSELine)
		}
		if msg, ok, err := r.line(line); ok || err != nil {
			return msg, ok, err
		}
	}
}

// line takes one line; a blank line after fields completes the message.
func (r *sseReader) line(line []byte) (sseMessage, bool, error) {
	line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
	if len(line) == 0 {
		if !r.hasField {
			return sseMessage{}, false, nil
		}
		return r.flush(), true, nil
	}
	if line[0] == ':' {
		return sseMessage{}, false, nil
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "event":
		r.event, r.hasName, r.hasField = string(value), true, true
	case "data":
		if r.dataN > 0 {
			r.data = append(r.data, '\n')
		}
		if len(r.data)+len(value) > MaxSSEEvent {
			return sseMessage{}, false, fmt.Errorf("anthropic API: a stream event is larger than %d bytes", MaxSSEEvent)
		}
		r.data = append(r.data, value...)
		r.dataN++
		r.hasField = true
	}
	return sseMessage{}, false, nil
}

// flush returns the message read so far and starts the next.
func (r *sseReader) flush() sseMessage {
	msg := sseMessage{event: eventName(r.event, r.hasName), data: string(r.data)}
	r.event, r.hasName, r.hasField, r.data, r.dataN = "", false, false, nil, 0
	return msg
}

// splitSSELines splits at \n, \r\n and a lone \r.
func splitSSELines(data []byte, atEOF bool) (int, []byte, error) {
	for i, c := range data {
		switch c {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil // a \n may follow
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// eventName marks a message without an event line, so dispatch can drop it.
func eventName(name string, has bool) string {
	if !has {
		return "\x00"
	}
	return name
}

// Stream is an open session event stream.
type Stream struct {
	body        io.ReadCloser
	reader      *sseReader
	idle        *time.Timer
	idleTimeout time.Duration
	cancel      context.CancelFunc

	mu      sync.Mutex
	stalled bool
}

// Next returns the next event. ping frames, nameless frames and named frames with empty data
// are skipped (specs §4.2); an `event: error` frame becomes an *APIError; a silent stream
// ends with ErrStreamIdle. Any bytes read, pings included, re-arm the idle timer. The event
// is returned by pointer: the goroutine reading a stream waits under this call, and events
// by value would widen every frame it waits in.
func (s *Stream) Next() (*Event, error) {
	for {
		msg, ok, err := s.reader.parse()
		if err != nil {
			if s.isStalled() {
				return nil, ErrStreamIdle
			}
			return nil, err
		}
		if !ok {
			if n := s.reader.fill(); n > 0 && s.idle != nil {
				s.idle.Reset(s.idleTimeout)
			}
			continue
		}
		if ev, skip, err := dispatch(msg); !skip {
			return ev, err
		}
	}
}

// dispatch turns a message into an event, or skips it (specs §4.2).
func dispatch(msg sseMessage) (ev *Event, skip bool, err error) {
	switch {
	case msg.event == "ping", msg.event == "\x00":
		return nil, true, nil
	case msg.event == "error":
		return nil, false, parseAPIError(0, nil, []byte(msg.data))
	case msg.data == "":
		return nil, true, nil
	}
	ev = &Event{}
	if err := json.Unmarshal([]byte(msg.data), ev); err != nil {
		return nil, false, fmt.Errorf("anthropic API: stream event %q is not JSON: %w", msg.event, err)
	}
	return ev, false, nil
}

// Close ends the stream.
func (s *Stream) Close() error {
	if s.idle != nil {
		s.idle.Stop()
	}
	s.cancel()
	return s.body.Close()
}

func (s *Stream) isStalled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stalled
}

// StreamEvents opens a session's event stream. Opening goes through the retry policy; a
// stream silent for idleTimeout (pings count as traffic) is dropped and Next returns
// ErrStreamIdle, so the caller reconnects and re-lists.
func (c *Client) StreamEvents(ctx context.Context, sessionID string, idleTimeout time.Duration) (*Stream, error) {
	seg, err := sessionSegment(sessionID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.send(ctx, http.MethodGet, c.endpoint("/v1/sessions/"+seg+"/events/stream", nil), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Stream{body: resp.Body, reader: newSSEReader(resp.Body), cancel: cancel, idleTimeout: idleTimeout}
	if idleTimeout > 0 {
		s.idle = time.AfterFunc(idleTimeout, func() {
			s.mu.Lock()
			s.stalled = true
			s.mu.Unlock()
			cancel()
		})
	}
	return s, nil
}
