package anthropic

import (
	"bufio"
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
type sseReader struct {
	sc *bufio.Scanner
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	// Start small: thousands of streams may be open, and the buffer grows to MaxSSELine on need.
	sc.Buffer(make([]byte, 0, 1<<10), MaxSSELine)
	sc.Split(splitSSELines)
	return &sseReader{sc: sc}
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

// next returns the next complete message, or io.EOF.
func (r *sseReader) next() (sseMessage, error) {
	var (
		event    string
		hasName  bool
		data     bytes.Buffer
		dataN    int
		hasField bool
	)
	for r.sc.Scan() {
		line := bytes.TrimPrefix(r.sc.Bytes(), []byte("\xef\xbb\xbf"))
		if len(line) == 0 {
			if !hasField {
				continue
			}
			return sseMessage{event: eventName(event, hasName), data: data.String()}, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			event, hasName, hasField = string(value), true, true
		case "data":
			if dataN > 0 {
				data.WriteByte('\n')
			}
			if data.Len()+len(value) > MaxSSEEvent {
				return sseMessage{}, fmt.Errorf("anthropic API: a stream event is larger than %d bytes", MaxSSEEvent)
			}
			data.Write(value)
			dataN++
			hasField = true
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return sseMessage{}, fmt.Errorf("anthropic API: a stream line is longer than %d bytes", MaxSSELine)
		}
		return sseMessage{}, err
	}
	if hasField {
		return sseMessage{event: eventName(event, hasName), data: data.String()}, nil
	}
	return sseMessage{}, io.EOF
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
	body   io.ReadCloser
	reader *sseReader
	idle   *time.Timer
	cancel context.CancelFunc

	mu      sync.Mutex
	stalled bool
}

// Next returns the next event. ping frames, nameless frames and named frames with empty data
// are skipped (specs §4.2); an `event: error` frame becomes an *APIError; a silent stream
// ends with ErrStreamIdle.
func (s *Stream) Next() (Event, error) {
	for {
		msg, err := s.reader.next()
		if err != nil {
			if s.isStalled() {
				return Event{}, ErrStreamIdle
			}
			return Event{}, err
		}
		switch {
		case msg.event == "ping", msg.event == "\x00":
			continue
		case msg.event == "error":
			return Event{}, parseAPIError(0, nil, []byte(msg.data))
		case msg.data == "":
			continue
		}
		var ev Event
		if err := json.Unmarshal([]byte(msg.data), &ev); err != nil {
			return Event{}, fmt.Errorf("anthropic API: stream event %q is not JSON: %w", msg.event, err)
		}
		return ev, nil
	}
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

// idleReader re-arms the idle timer on every read that returns bytes.
type idleReader struct {
	r       io.Reader
	timer   *time.Timer
	timeout time.Duration
}

func (i *idleReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	if n > 0 {
		i.timer.Reset(i.timeout)
	}
	return n, err
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
	s := &Stream{body: resp.Body, cancel: cancel}
	var body io.Reader = resp.Body
	if idleTimeout > 0 {
		s.idle = time.AfterFunc(idleTimeout, func() {
			s.mu.Lock()
			s.stalled = true
			s.mu.Unlock()
			cancel()
		})
		body = &idleReader{r: resp.Body, timer: s.idle, timeout: idleTimeout}
	}
	s.reader = newSSEReader(body)
	return s, nil
}
