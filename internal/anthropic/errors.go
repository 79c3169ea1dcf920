package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// APIError is an error response of the API, or an `event: error` frame of a stream (Status 0).
// It never carries request headers, so the API key cannot leak through it.
type APIError struct {
	Status    int
	Type      string // error.type, such as not_found_error
	Message   string // error.message, or the body text when it is not the envelope
	ErrorCode string // error.details.error_code, when a string
	RequestID string
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("anthropic API")
	if e.Status != 0 {
		fmt.Fprintf(&b, ": %d", e.Status)
	} else {
		b.WriteString(": stream error")
	}
	if e.Type != "" {
		b.WriteString(" " + e.Type)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RequestID != "" {
		b.WriteString(" (request-id " + e.RequestID + ")")
	}
	return b.String()
}

// errorEnvelope is the API's error body: {"type":"error","error":{...},"request_id":...}.
type errorEnvelope struct {
	Type  string `json:"type"`
	Error struct {
		Type    string         `json:"type"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
	RequestID *string `json:"request_id"`
}

// maxErrorBody bounds how much of an error body is read and kept.
const maxErrorBody = 64 << 10

// parseAPIError builds the APIError of a status and body; a body that is not the envelope
// becomes the message, cut to 1 KiB.
func parseAPIError(status int, header http.Header, body []byte) *APIError {
	e := &APIError{Status: status}
	if header != nil {
		e.RequestID = header.Get("request-id")
	}
	var env errorEnvelope
	if err := json.Unmarshal(body, &env); err == nil && env.Error.Type != "" {
		e.Type, e.Message = env.Error.Type, env.Error.Message
		if code, ok := env.Error.Details["error_code"].(string); ok {
			e.ErrorCode = code
		}
		if env.RequestID != nil && e.RequestID == "" {
			e.RequestID = *env.RequestID
		}
		return e
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 1024 {
		msg = msg[:1024] + "…"
	}
	e.Message = msg
	return e
}

// IsFatal4xx reports whether err is a 4xx that retrying cannot fix: any 4xx but 408, 409 and
// 429 (the helpers' policy, specs §9.2).
func IsFatal4xx(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	return ae.Status >= 400 && ae.Status < 500 && !retryableStatus(ae.Status)
}

// retryableStatus is the core client's policy: 408, 409, 429 and every status >= 500.
func retryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// ConnectionError is a request that never got a response: refused, reset, timed out.
type ConnectionError struct {
	Op  string
	Err error
}

func (e *ConnectionError) Error() string { return "anthropic API: " + e.Op + ": " + e.Err.Error() }
func (e *ConnectionError) Unwrap() error { return e.Err }
