package gateapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/approvals"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/confirm"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/gate"
)

// API serves the gate over HTTP to harness and workflow code, and receives Managed Agents
// webhooks. Every route but the probes and the webhook needs an authenticated caller, unless
// Auth is nil (the --insecure-no-auth development mode, loopback only). /metrics is not among
// them: MetricsHandler serves it on a listener of its own (--metrics-listen), so the callers
// of the API port see no more of the confirmer than its answers.
type API struct {
	Gate    *gate.Gate
	Auth    *Authenticator
	Webhook *anthropic.WebhookVerifier // nil: no webhook receiver
	Queue   *confirm.Queue
	// Approvals, when set, lets callers of the harness and workflow routes opt in to the human
	// lane (approvals.go) and serves GET /v1/approvals/{name}.
	Approvals *approvals.Store
	// HarnessSettings is the path of the bundle's harness-settings.json; its
	// harness-network-policy.json is read from the same directory.
	HarnessSettings string
	// Decisions, when set, records every decision the API makes (decisionlog).
	Decisions *decisionlog.Recorder
	// Gatherer is what MetricsHandler serves.
	Gatherer prometheus.Gatherer
	Log      logr.Logger
	// MaxWebhookBodies bounds the webhook bodies being read at once; beyond it the route
	// answers 503 with Retry-After. Default DefaultMaxWebhookBodies.
	MaxWebhookBodies int
}

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

// NewMetricsServer is the HTTP server of MetricsHandler on addr, bounded like NewServer's.
func (a *API) NewMetricsServer(addr string, o ServerOptions) *http.Server {
	srv := a.NewServer(addr, o)
	srv.Handler = a.MetricsHandler()
	return srv
}

// Handler returns the routes.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range a.routes() {
		mux.HandleFunc(rt.pattern, rt.handler)
	}
	return mux
}

// route is one route of the API: a ServeMux pattern, "METHOD /path", and its handler. Every
// route is described in openapi.yaml; TestOpenAPIRoutes holds the two to each other.
type route struct {
	pattern string
	handler http.HandlerFunc
}

// routes are the API's routes, the ones Handler registers.
func (a *API) routes() []route {
	n := a.MaxWebhookBodies
	if n <= 0 {
		n = DefaultMaxWebhookBodies
	}
	slots := make(chan struct{}, n) // one per webhook body being read
	return []route{
		{"GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("ok\n")) // a failed write means the prober left; there is no one to tell
		}},
		{"GET /readyz", a.readyz},
		{"GET /openapi.yaml", serveOpenAPI},
		{"POST /v1/guard", a.authed(a.guard)},
		{"POST /v1/harness/approvals", a.authed(a.harnessApprovals)},
		{"POST /v1/workflow/needs-approval", a.authed(a.needsApproval)},
		{"GET /v1/harness/settings", a.authed(a.harnessSettings)},
		{"GET /v1/approvals/{name}", a.authed(a.getApproval)},
		{"POST /v1/hook/approvals", a.authed(a.hookApproval)},
		{"POST /v1/webhooks/anthropic", func(w http.ResponseWriter, r *http.Request) { a.webhook(w, r, slots) }},
	}
}

// OpenAPIDocument is the OpenAPI 3.1 document of the API, served at GET /openapi.yaml. It is
// built in and describes the routes only: nothing of a deployment, no secret.
//
//go:embed openapi.yaml
var OpenAPIDocument []byte

// serveOpenAPI answers GET /openapi.yaml, unauthenticated like the probes.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(OpenAPIDocument) // a failed write means the client left; there is no one to tell
}

// readyz says whether a verified snapshot is loaded and, when not, the code of why. The probe
// is unauthenticated and on the API port: it names no digest, path or error (the Reloader's log
// says which snapshot is in force, and where a failed one was read).
func (a *API) readyz(w http.ResponseWriter, _ *http.Request) {
	if err := a.Gate.Ready(); err != nil {
		reason := gate.CodeSnapshotMissing
		var se *gate.SnapshotError
		if errors.As(err, &se) {
			reason = se.Code
		}
		writeJSONStatus(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": reason})
		return
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"ready": true})
}

// requestLog is the logger for one request: the one its context carries, else the API's,
// with the request's method, path and peer.
func (a *API) requestLog(r *http.Request) logr.Logger {
	log, err := logr.FromContext(r.Context())
	if err != nil {
		log = a.Log
	}
	return log.WithValues("method", r.Method, "path", r.URL.Path, "remoteAddr", r.RemoteAddr)
}

// authed authenticates the request and hands the handler its caller: the zero Caller under
// --insecure-no-auth (Auth nil), which authenticates nobody.
func (a *API) authed(h func(http.ResponseWriter, *http.Request, Caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var caller Caller
		if a.Auth != nil {
			c, err := a.Auth.AuthenticateCaller(r)
			if err != nil {
				status, msg := authStatus(err), err.Error()
				if status == http.StatusServiceUnavailable {
					// The review failed on our side: its detail (the API server's URL, the
					// dial error) is for the log, not for a caller not yet authenticated.
					a.requestLog(r).Error(err, "the caller's token could not be reviewed")
					msg = "the token could not be reviewed; retry later"
				}
				writeError(w, status, msg)
				return
			}
			caller = c
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
		h(w, r, caller)
	}
}

// writeJSONStatus answers with status and v as JSON. v is encoded before the status is sent,
// so a value that cannot be encoded (a bug here, not the caller's) is a 500, not a truncated 200.
func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"the response could not be encoded"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status is sent; a failed write means the client left, and there is no one to tell.
	_, _ = w.Write(append(body, '\n'))
}

// writeError answers with status and the API's error body, {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSONStatus(w, status, errorBody{Error: msg})
}

// errorBody is the API's error body; Code, when set, says which refusal it is
// (approval_not_trusted, policy_mismatch).
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// writeConflict answers 409 with an error body that names its code: the call must not run.
func writeConflict(w http.ResponseWriter, msg, code string) {
	writeJSONStatus(w, http.StatusConflict, errorBody{Error: msg, Code: code})
}

func badRequest(w http.ResponseWriter, err error) {
	writeError(w, http.StatusBadRequest, err.Error())
}

// decide runs the gate for one API call; rawInput is the input as the caller sent it.
func (a *API) decide(c *gate.Call, caller Caller, rawInput []byte) gate.Decision {
	return publicDecision(a.Decisions.Evaluate(a.Gate, identify(c, caller), rawInput, caller.origin()))
}

// identify tells the rules who is calling: the ServiceAccount TokenReview authenticated
// (caller.serviceAccount), or nobody without authentication (--insecure-no-auth). Nothing the
// request body says about its caller is taken.
func identify(c *gate.Call, caller Caller) *gate.Call {
	c.Caller.ServiceAccount = caller.ServiceAccount
	return c
}

// gateFailureReasons are what callers are told of the gate's own failures. The reasons the
// gate gives carry file paths, file-system errors and panic values; those stay in the decision
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

func (a *API) guard(w http.ResponseWriter, r *http.Request, caller Caller) {
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

// harnessSettingsResponse is GET /v1/harness/settings: the bundle's two harness files, each
// the value of the type its key names.
type harnessSettingsResponse struct {
	// Settings is harness-settings.json, to spread into HarnessAgentSettings.
	Settings json.RawMessage `json:"settings"`
	// NetworkPolicy is harness-network-policy.json, a HarnessV1NetworkPolicy for the sandbox
	// session's setNetworkPolicy.
	NetworkPolicy json.RawMessage `json:"networkPolicy"`
}

func (a *API) harnessSettings(w http.ResponseWriter, _ *http.Request, _ Caller) {
	settings, policy, err := a.readHarnessFiles()
	switch {
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "the harness settings are not available")
	case !isJSONObject(settings) || !isJSONObject(policy):
		writeError(w, http.StatusServiceUnavailable, "the harness settings are not valid JSON")
	default:
		writeJSONStatus(w, http.StatusOK, harnessSettingsResponse{Settings: settings, NetworkPolicy: policy})
	}
}

// readHarnessFiles reads the two harness files of one version of the bundle. Kubelet swaps a
// ConfigMap volume's files all at once, which may fall between two reads: the settings read
// again after the network policy tell a pair from one version from one that straddles a swap.
func (a *API) readHarnessFiles() (settings, policy []byte, err error) {
	policyPath := filepath.Join(filepath.Dir(a.HarnessSettings), bootstrap.KeyHarnessNetworkPolicy)
	var again []byte
	for range 3 {
		if settings, err = os.ReadFile(a.HarnessSettings); err != nil {
			return nil, nil, err
		}
		if policy, err = os.ReadFile(policyPath); err != nil {
			return nil, nil, err
		}
		if again, err = os.ReadFile(a.HarnessSettings); err != nil {
			return nil, nil, err
		}
		if bytes.Equal(again, settings) {
			return settings, policy, nil
		}
	}
	return nil, nil, errors.New("the harness settings kept changing while read")
}

func isJSONObject(data []byte) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal(data, &v) == nil && v != nil
}

// MetricsHandler serves /metrics alone (Gatherer), for a listener apart from the API's: the
// metrics name the snapshot in force, rule outcomes and the sessions' activity, which the
// API's callers are not told.
func (a *API) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	if a.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(a.Gatherer, promhttp.HandlerOpts{}))
	}
	return mux
}
