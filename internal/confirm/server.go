package confirm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/intutic/gate-operator/internal/gate"
)

// maxRequestBody bounds every request body of the gate HTTP API.
const maxRequestBody = 1 << 20

// maxWebhookBody bounds a webhook body: the events are thin (ids and a type, well under
// 1 KiB), and the route is read before anything is authenticated.
const maxWebhookBody = 256 << 10

// DefaultMaxWebhookBodies bounds the webhook bodies being read at once. Deliveries arrive a
// few at a time and are read in milliseconds; 32 bodies of at most 256 KiB keep what
// unauthenticated clients can make the server hold under 16 MiB.
const DefaultMaxWebhookBodies = 32

// API serves the gate over HTTP to harness and workflow code, and receives Managed Agents
// webhooks. Every route but the probes, metrics and the webhook needs an authenticated caller,
// unless Auth is nil (the --insecure-no-auth development mode, loopback only).
type API struct {
	Gate            *gate.Gate
	Reloader        *Reloader
	Auth            *Authenticator
	Webhook         *WebhookVerifier // nil: no webhook receiver
	Queue           *Queue
	HarnessSettings string // path of harness-settings.json
	Metrics         *Metrics
	Gatherer        prometheus.Gatherer
	Log             logr.Logger
	// MaxWebhookBodies bounds the webhook bodies being read at once; beyond it the route
	// answers 503 with Retry-After. Default DefaultMaxWebhookBodies.
	MaxWebhookBodies int
}

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

// NewServer is the HTTP server of the API on addr, with o's bounds on slow and idle clients.
func (a *API) NewServer(addr string, o ServerOptions) *http.Server {
	def := DefaultServerOptions
	return &http.Server{
		Addr:              addr,
		Handler:           a.Handler(),
		ReadHeaderTimeout: orDefault(o.ReadHeaderTimeout, def.ReadHeaderTimeout),
		ReadTimeout:       orDefault(o.ReadTimeout, def.ReadTimeout),
		WriteTimeout:      orDefault(o.WriteTimeout, def.WriteTimeout),
		IdleTimeout:       orDefault(o.IdleTimeout, def.IdleTimeout),
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// Handler returns the routes.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", a.readyz)
	if a.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(a.Gatherer, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("POST /v1/guard", a.authed(a.guard))
	mux.HandleFunc("POST /v1/harness/approvals", a.authed(a.harnessApprovals))
	mux.HandleFunc("POST /v1/workflow/needs-approval", a.authed(a.needsApproval))
	mux.HandleFunc("GET /v1/harness/settings", a.authed(a.harnessSettings))
	n := a.MaxWebhookBodies
	if n <= 0 {
		n = DefaultMaxWebhookBodies
	}
	slots := make(chan struct{}, n) // one per webhook body being read
	mux.HandleFunc("POST /v1/webhooks/anthropic", func(w http.ResponseWriter, r *http.Request) { a.webhook(w, r, slots) })
	return mux
}

func (a *API) readyz(w http.ResponseWriter, _ *http.Request) {
	if _, err := a.Gate.Policy(); err != nil {
		// The probe is unauthenticated: the code says why, the Reloader's log says where.
		reason := gate.CodeSnapshotMissing
		var se *gate.SnapshotError
		if errors.As(err, &se) {
			reason = se.Code
		}
		writeJSONStatus(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": reason})
		return
	}
	digest := ""
	if a.Reloader != nil {
		digest = a.Reloader.Digest()
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"ready": true, "snapshotDigest": digest})
}

type ctxKey struct{}

// requestLog is the logger for one request: the one its context carries, else the API's,
// with the request's method, path and peer.
func (a *API) requestLog(r *http.Request) logr.Logger {
	log, err := logr.FromContext(r.Context())
	if err != nil {
		log = a.Log
	}
	return log.WithValues("method", r.Method, "path", r.URL.Path, "remoteAddr", r.RemoteAddr)
}

func (a *API) authed(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller := "insecure-no-auth"
		if a.Auth != nil {
			sa, err := a.Auth.Authenticate(r)
			if err != nil {
				status, msg := authStatus(err), err.Error()
				if status == http.StatusServiceUnavailable {
					// The review failed on our side: its detail (the API server's URL, the
					// dial error) is for the log, not for a caller not yet authenticated.
					a.requestLog(r).Error(err, "the caller's token could not be reviewed")
					msg = "the token could not be reviewed; retry later"
				}
				writeJSONStatus(w, status, map[string]any{"error": msg})
				return
			}
			caller = sa
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
		h(w, r, caller)
	}
}

// decodeStrict decodes the request body, one JSON value, with gate.DecodeStrict: field names
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
	if err := gate.DecodeStrict(data, v); err != nil {
		if errors.Is(err, gate.ErrTrailingData) {
			return errors.New("the request body has data after the JSON value")
		}
		return fmt.Errorf("the request body is not valid: %w", err)
	}
	return nil
}

func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func badRequest(w http.ResponseWriter, err error) {
	writeJSONStatus(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
}

// decide runs the gate for one API call; rawInput is the input as the caller sent it.
func (a *API) decide(c *gate.Call, caller string, rawInput []byte) gate.Decision {
	d, _ := decide(a.Gate, a.Metrics, a.Log, c, rawInput, "caller", caller)
	return publicDecision(d)
}

// gateFailureReasons are what callers are told of the gate's own failures. The reasons the
// gate gives carry file paths, file-system errors and panic values; those stay in the audit
// line written for the decision (same incident ID).
var gateFailureReasons = map[string]string{
	gate.CodeSnapshotMissing:    "no policy snapshot is loaded",
	gate.CodeSnapshotCorrupt:    "the policy snapshot cannot be read",
	gate.CodeSnapshotUnverified: "the policy snapshot does not verify",
	gate.CodeGateCrashed:        "the gate failed while evaluating the call",
}

// publicDecision is d as an API caller may see it: the verdict and code of a gate failure
// with a generic reason, every other decision as it is.
func publicDecision(d gate.Decision) gate.Decision {
	if reason, ok := gateFailureReasons[d.Code]; ok && d.Rule == "" {
		d.Reason, d.Message = reason, gate.RefusalPrefix+reason
	}
	return d
}

// guardRequest is POST /v1/guard.
type guardRequest struct {
	Tool    string          `json:"tool"`
	Server  string          `json:"server,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	Surface string          `json:"surface,omitempty"`
	Session string          `json:"session,omitempty"`
}

func (a *API) guard(w http.ResponseWriter, r *http.Request, caller string) {
	var req guardRequest
	if err := decodeStrict(r, &req); err != nil {
		badRequest(w, err)
		return
	}
	if req.Tool == "" {
		badRequest(w, errors.New("tool is required"))
		return
	}
	switch req.Surface {
	case "":
		req.Surface = gate.SurfaceAPI
	case gate.SurfaceHook, gate.SurfaceHarness, gate.SurfaceWorkflow, gate.SurfaceManagedAgents, gate.SurfaceAPI:
	default:
		badRequest(w, fmt.Errorf("surface %q is not hook, harness, workflow, managed-agents or api", req.Surface))
		return
	}
	input, err := gate.RenderRawInput(req.Input)
	if err != nil {
		badRequest(w, fmt.Errorf("input is not JSON: %w", err))
		return
	}
	d := a.decide(&gate.Call{Tool: req.Tool, Server: req.Server, Input: input, Surface: req.Surface, Session: req.Session}, caller, req.Input)
	writeJSONStatus(w, http.StatusOK, d)
}

func (a *API) harnessSettings(w http.ResponseWriter, _ *http.Request, _ string) {
	data, err := os.ReadFile(a.HarnessSettings)
	if err != nil {
		writeJSONStatus(w, http.StatusServiceUnavailable, map[string]any{"error": "the harness settings are not available"})
		return
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		writeJSONStatus(w, http.StatusServiceUnavailable, map[string]any{"error": "the harness settings are not valid JSON"})
		return
	}
	writeJSONStatus(w, http.StatusOK, v)
}

// webhook receives Managed Agents webhooks: 401 on a bad signature, 400 on a bad body, 413
// on one past maxWebhookBody, 503 when MaxWebhookBodies are already being read, nothing
// acted on in any of these; a replay is acknowledged and ignored; session.requires_action
// queues its session and returns at once.
func (a *API) webhook(w http.ResponseWriter, r *http.Request, slots chan struct{}) {
	if a.Webhook == nil {
		writeJSONStatus(w, http.StatusNotFound, map[string]any{"error": "no webhook signing key is configured"})
		return
	}
	body, status, msg := a.readWebhookBody(w, r, slots)
	if status != 0 {
		writeJSONStatus(w, status, map[string]any{"error": msg})
		return
	}
	switch err := a.Webhook.Verify(r.Header, body); {
	case errors.Is(err, ErrWebhookReplayed):
		writeJSONStatus(w, http.StatusOK, map[string]any{"ignored": "replayed webhook-id"})
		return
	case err != nil:
		writeJSONStatus(w, http.StatusUnauthorized, map[string]any{"error": err.Error()})
		return
	}
	var env struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Type != "event" || env.Data.Type == "" {
		badRequest(w, errors.New(`the body is not a webhook event {"type":"event","data":{...}}`))
		return
	}
	if env.Data.Type != "session.requires_action" {
		writeJSONStatus(w, http.StatusOK, map[string]any{"ignored": env.Data.Type})
		return
	}
	if env.Data.ID == "" {
		badRequest(w, errors.New("session.requires_action without a session id"))
		return
	}
	if err := a.Queue.Add(env.Data.ID); err != nil {
		// The sender retries; the watch and poll loops catch the session meanwhile.
		a.requestLog(r).Error(err, "webhook session not queued", "session", env.Data.ID)
		writeJSONStatus(w, http.StatusServiceUnavailable, map[string]any{"error": "the session cannot be queued now; retry later"})
		return
	}
	writeJSONStatus(w, http.StatusAccepted, map[string]any{"queued": env.Data.ID})
}

// readWebhookBody reads a webhook body, at most maxWebhookBody bytes, in one of a bounded
// number of slots: nothing is authenticated before the signature is checked over the whole
// body, so the slots bound what unauthenticated clients can make the server hold. A status
// other than 0 is the answer to give instead.
func (a *API) readWebhookBody(w http.ResponseWriter, r *http.Request, slots chan struct{}) (body []byte, status int, msg string) {
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	default:
		w.Header().Set("Retry-After", "1")
		return nil, http.StatusServiceUnavailable, "too many webhook deliveries in progress; retry later"
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes", maxWebhookBody)
	case err != nil:
		// A stalled or broken upload; the read error names addresses, so it stays here.
		a.requestLog(r).V(1).Info("webhook body not read", "error", err.Error())
		return nil, http.StatusBadRequest, "the request body could not be read"
	}
	return body, 0, ""
}
