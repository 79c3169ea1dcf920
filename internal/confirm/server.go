package confirm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/intutic/gate-operator/internal/gate"
)

// maxRequestBody bounds every request body of the gate HTTP API.
const maxRequestBody = 1 << 20

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
	mux.HandleFunc("POST /v1/webhooks/anthropic", a.webhook)
	return mux
}

func (a *API) readyz(w http.ResponseWriter, _ *http.Request) {
	if _, err := a.Gate.Policy(); err != nil {
		writeJSONStatus(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": err.Error()})
		return
	}
	digest := ""
	if a.Reloader != nil {
		digest = a.Reloader.Digest()
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"ready": true, "snapshotDigest": digest})
}

type ctxKey struct{}

func (a *API) authed(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller := "insecure-no-auth"
		if a.Auth != nil {
			sa, err := a.Auth.Authenticate(r)
			if err != nil {
				writeJSONStatus(w, authStatus(err), map[string]any{"error": err.Error()})
				return
			}
			caller = sa
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
		h(w, r, caller)
	}
}

// decodeStrict decodes one JSON value, refusing unknown fields and trailing data.
func decodeStrict(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("the request body is larger than %d bytes", maxRequestBody)
		}
		return fmt.Errorf("the request body is not valid: %w", err)
	}
	if dec.More() {
		return errors.New("the request body has data after the JSON value")
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

// webhook receives Managed Agents webhooks: 401 on a bad signature, 400 on a bad body,
// nothing acted on in either case; a replay is acknowledged and ignored;
// session.requires_action queues its session and returns at once.
func (a *API) webhook(w http.ResponseWriter, r *http.Request) {
	if a.Webhook == nil {
		writeJSONStatus(w, http.StatusNotFound, map[string]any{"error": "no webhook signing key is configured"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		badRequest(w, fmt.Errorf("the request body is larger than %d bytes", maxRequestBody))
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
		writeJSONStatus(w, http.StatusServiceUnavailable, map[string]any{"error": err.Error()})
		return
	}
	writeJSONStatus(w, http.StatusAccepted, map[string]any{"queued": env.Data.ID})
}
