package anthropic

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// refSSEReader is the parser sseReader replaced (bufio.Scanner with splitSSELines), kept as
// the reference that FuzzSSEReaderMatchesReference holds the new one to.
type refSSEReader struct{ sc *bufio.Scanner }

func newRefSSEReader(r io.Reader) *refSSEReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<10), MaxSSELine)
	sc.Split(splitSSELines)
	return &refSSEReader{sc: sc}
}

func (r *refSSEReader) next() (sseMessage, error) {
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

// messages reads every message, and the error that ended the stream.
func messages(next func() (sseMessage, error)) ([]sseMessage, error) {
	var out []sseMessage
	for range 10000 {
		m, err := next()
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, errors.New("more than 10000 messages")
}

// FuzzSSEReaderMatchesReference: on any input, delivered whole or a byte at a time (so \r\n
// and lines fall across reads), the parser yields the messages and the final error of the
// Scanner-based parser it replaced.
func FuzzSSEReaderMatchesReference(f *testing.F) {
	for _, s := range []string{
		"event: agent.tool_use\ndata: {\"id\":\"e\"}\n\n",
		"\r\r\n:\xef\xbb\xbfevent:\rdata\n\ndata: a\ndata: b",
		"event: x\r\ndata: 1\r\n\r\nevent: y\rdata: 2\r\r",
		"event: ping\n\n: c\n\ndata:  two\nid: 1\n\n",
		strings.Repeat("data: "+strings.Repeat("z", 700)+"\n", 3) + "\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stream string) {
		want, wantErr := messages(newRefSSEReader(strings.NewReader(stream)).next)
		for name, r := range map[string]io.Reader{"whole": strings.NewReader(stream), "a byte at a time": iotest.OneByteReader(strings.NewReader(stream))} {
			got, err := messages(newSSEReader(r).next)
			if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Fatalf("%s: %q\ngot  %q, %v\nwant %q, %v", name, stream, got, err, want, wantErr)
			}
		}
	})
}
