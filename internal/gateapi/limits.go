package gateapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/intutic/gate-operator/internal/strictjson"
)

// Request limits: what one caller, authenticated or not, can make the server read and hold.

// maxRequestBody bounds every request body of the gate HTTP API.
const maxRequestBody = 1 << 20

// maxWebhookBody bounds a webhook body: the events are thin (ids and a type, well under
// 1 KiB), and the route is read before anything is authenticated.
const maxWebhookBody = 256 << 10

// DefaultMaxWebhookBodies bounds the webhook bodies being read at once. Deliveries arrive a
// few at a time and are read in milliseconds; 32 bodies of at most 256 KiB keep what
// unauthenticated clients can make the server hold under 16 MiB.
const DefaultMaxWebhookBodies = 32

// ServerOptions bound how long a client may hold a connection of the server; a zero field
// takes its default. No route streams: every answer is one small JSON document, so a
// connection is either reading a request, writing its answer or idle.
type ServerOptions struct {
	// ReadHeaderTimeout bounds reading the request headers; default 10 s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading the whole request, body included; default 15 s. Bodies are at
	// most 1 MiB from callers in the cluster, sent in milliseconds; a body still arriving
	// after 15 s is a stalled or hostile client.
	ReadTimeout time.Duration
	// WriteTimeout bounds the request from the end of its headers to the end of the answer;
	// default 30 s: the read timeout, a TokenReview (DefaultReviewTimeout) and the decision.
	WriteTimeout time.Duration
	// IdleTimeout bounds a kept-alive connection between requests; default 120 s, longer than
	// Go's client-side 90 s, so it is the client that closes an idle connection, never a
	// server-side close racing a new request.
	IdleTimeout time.Duration
}

// DefaultServerOptions are the bounds cmd/confirmer serves with.
var DefaultServerOptions = ServerOptions{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       15 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       120 * time.Second,
}

// maxHeaderBytes bounds the request headers: a ServiceAccount token is 1-2 KiB, webhook
// headers are smaller still, and net/http's default (1 MiB) is memory unauthenticated
// clients could hold.
const maxHeaderBytes = 64 << 10

// decodeStrict decodes the request body, one JSON value, with strictjson.Decode: field names
// match exactly, unknown and repeated fields are refused, and nothing may follow the value.
func decodeStrict(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("the request body is larger than %d bytes", maxRequestBody)
		}
		// A stalled or broken upload: the read error names the server's address, so it is
		// not passed on.
		return errors.New("the request body could not be read")
	}
	if err := strictjson.Decode(data, v); err != nil {
		if errors.Is(err, strictjson.ErrTrailingData) {
			return errors.New("the request body has data after the JSON value")
		}
		return fmt.Errorf("the request body is not valid: %w", err)
	}
	return nil
}
