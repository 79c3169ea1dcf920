package gateapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/confirm"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

// fakeReviewer knows a few tokens; it stands in for the API server in the handler tests (the
// envtest package checks the real TokenReview).
type fakeReviewer map[string]string

func (f fakeReviewer) Create(_ context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	if tr.Spec.Token == "broken" {
		return nil, errors.New("the API server is unreachable")
	}
	out := tr.DeepCopy()
	if user, ok := f[tr.Spec.Token]; ok {
		// A user "<username>@<pod>/<uid>" is a token bound to that pod, as a projected token is.
		user, pod, bound := strings.Cut(user, "@")
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences, User: authenticationv1.UserInfo{Username: user}}
		if name, uid, _ := strings.Cut(pod, "/"); bound {
			out.Status.User.Extra = map[string]authenticationv1.ExtraValue{extraPodName: {name}, extraPodUID: {uid}}
		}
	}
	return out, nil
}

type apiFixture struct {
	srv       *httptest.Server
	metrics   *httptest.Server // the metrics listener, apart from srv
	reg       *prometheus.Registry
	fake      *anthropictest.Server
	bundleDir string // holds the harness files GET /v1/harness/settings serves
}

func newAPI(t *testing.T, g *gate.Gate) *apiFixture {
	t.Helper()
	dir := t.TempDir()
	settings := filepath.Join(dir, bootstrap.KeyHarnessSettings)
	if err := os.WriteFile(settings, []byte(`{"permissionMode":"allow-edits","inactiveTools":["bash"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, bootstrap.KeyHarnessNetworkPolicy), []byte(`{"mode":"deny-all"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	fake := newFake(t)
	c := newConfirmer(t, fake)
	wh, err := anthropic.NewWebhookVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	api := &API{
		Gate: g,
		Auth: &Authenticator{Reviewer: fakeReviewer{
			"orchestrator-token": "system:serviceaccount:agents:orchestrator",
			"ci-token":           "system:serviceaccount:ci:builder",
			"user-token":         "alice",
		}, Allowed: []string{"agents/orchestrator", "tools/*"}},
		Webhook:         wh,
		Queue:           confirm.NewQueue(c, 4),
		HarnessSettings: settings,
		Decisions:       decisionlog.New(nil, decisionlog.Source{}, reg),
		Gatherer:        reg,
		Log:             logr.Discard(),
	}
	srv, metrics := httptest.NewServer(api.Handler()), httptest.NewServer(api.MetricsHandler())
	t.Cleanup(srv.Close)
	t.Cleanup(metrics.Close)
	return &apiFixture{srv: srv, metrics: metrics, reg: reg, fake: fake, bundleDir: dir}
}

func (f *apiFixture) call(t *testing.T, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(bytes.TrimSpace(raw)) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %s", method, path, raw)
		}
	}
	return resp.StatusCode, out
}

const tok = "orchestrator-token"

func TestGuard(t *testing.T) {
	f := newAPI(t, gatetest.CodingAgents(t))
	status, out := f.call(t, "POST", "/v1/guard", tok, `{"tool":"Bash","input":{"command":"rm -rf /"},"surface":"harness","session":"s1"}`)
	if status != 200 || out["verdict"] != "Block" || out["message"] != "[Intutic Governance] BLOCKED: destructive command on the root filesystem" || out["incidentId"] == "" {
		t.Fatalf("%d %v", status, out)
	}
	status, out = f.call(t, "POST", "/v1/guard", tok, `{"tool":"read","input":"{\"file_path\":\"a\"}"}`)
	if status != 200 || out["verdict"] != "Allow" {
		t.Fatalf("%d %v", status, out)
	}
	for body, want := range map[string]string{
		`{"tool":"x","allowAll":true}`:                           `unknown field "allowAll"`,
		`{"input":{}}`:                                           "tool is required",
		`{"tool":"x","surface":"browser"}`:                       `surface "browser" is not`,
		`{"tool":"x"} {"tool":"y"}`:                              "data after the JSON value",
		`{"tool":"` + strings.Repeat("a", maxRequestBody) + `"}`: "larger than",
	} {
		status, out := f.call(t, "POST", "/v1/guard", tok, body)
		if status != 400 || !strings.Contains(out["error"].(string), want) {
			t.Errorf("%.40s: %d %v, want 400 with %q", body, status, out, want)
		}
	}
}

func TestAuthentication(t *testing.T) {
	f := newAPI(t, gatetest.CodingAgents(t))
	body := `{"tool":"read"}`
	cases := map[string]int{"": 401, "nonsense": 401, "user-token": 403, "ci-token": 403, "broken": 503, tok: 200}
	for token, want := range cases {
		if status, out := f.call(t, "POST", "/v1/guard", token, body); status != want {
			t.Errorf("token %q: %d %v, want %d", token, status, out, want)
		}
	}
	a := &Authenticator{Reviewer: fakeReviewer{"t": "system:serviceaccount:tools:anything"}, Allowed: []string{"tools/*"}}
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("Authorization", "Bearer t")
	if sa, err := a.Authenticate(r); err != nil || sa != "tools/anything" {
		t.Fatalf("namespace wildcard: %q %v", sa, err)
	}
	if err := ValidateAllowList([]string{"agents/orchestrator", "tools/*"}); err != nil {
		t.Fatal(err)
	}
	if err := ValidateAllowList([]string{"orchestrator"}); err == nil {
		t.Fatal("an entry without a namespace was accepted")
	}
}

func TestHarnessApprovals(t *testing.T) {
	f := newAPI(t, gatetest.CodingAgents(t))
	body := `{"pendingApprovals":[
		{"type":"tool-approval-request","approvalId":"toolu_1","toolCall":{"type":"tool-call","toolCallId":"toolu_1","toolName":"bash","input":{"command":"rm -rf /"},"providerExecuted":true}},
		{"approvalId":"toolu_2","toolCallId":"toolu_2","toolName":"read","input":"{\"file_path\":\"README.md\"}","kind":"builtin","nativeName":"Read"},
		{"approvalId":"appr_3","toolCallId":"call_3","toolName":"mcp__deploy__run","input":"{}","kind":"custom","providerExecuted":false}
	],"session":"hsess_1"}`
	status, out := f.call(t, "POST", "/v1/harness/approvals", tok, body)
	if status != 200 {
		t.Fatalf("%d %v", status, out)
	}
	conts := out["toolApprovalContinuations"].([]any)
	if len(conts) != 2 {
		t.Fatalf("continuations %v", conts)
	}
	deny := conts[0].(map[string]any)
	if deny["type"] != "tool-approval-response" || deny["approvalId"] != "toolu_1" || deny["approved"] != false ||
		deny["reason"] != "[Intutic Governance] BLOCKED: destructive command on the root filesystem" || deny["providerExecuted"] != true {
		t.Fatalf("deny %v", deny)
	}
	if ar := deny["approvalResponse"].(map[string]any); ar["approvalId"] != "toolu_1" || ar["approved"] != false || ar["type"] != "tool-approval-response" {
		t.Fatalf("approvalResponse %v", ar)
	}
	if tc := deny["toolCall"].(map[string]any); tc["type"] != "tool-call" || tc["toolCallId"] != "toolu_1" || tc["toolName"] != "bash" {
		t.Fatalf("toolCall %v", tc)
	}
	allow := conts[1].(map[string]any)
	if allow["approved"] != true || allow["providerExecuted"] != true {
		t.Fatalf("a built-in row must come back approved and provider-executed: %v", allow)
	}
	if in := allow["toolCall"].(map[string]any)["input"].(map[string]any); in["file_path"] != "README.md" {
		t.Fatalf("the row's JSON-text input must be parsed: %v", in)
	}
	pending := out["pending"].([]any)
	if len(pending) != 1 || pending[0].(map[string]any)["approvalId"] != "appr_3" {
		t.Fatalf("pending %v", pending)
	}
	if status, out := f.call(t, "POST", "/v1/harness/approvals", tok, `{"pendingApprovals":[{"approvalId":"x"}]}`); status != 400 || !strings.Contains(out["error"].(string), "pendingApprovals[0]") {
		t.Fatalf("%d %v", status, out)
	}
}

func TestHarnessApprovalsGateCrash(t *testing.T) {
	f := newAPI(t, gate.New("")) // no snapshot loaded: every call is refused
	status, out := f.call(t, "POST", "/v1/harness/approvals", tok, `{"pendingApprovals":[{"approvalId":"a","toolCallId":"a","toolName":"read","input":"{}","kind":"builtin"}]}`)
	c := out["toolApprovalContinuations"].([]any)[0].(map[string]any)
	if status != 200 || c["approved"] != false || !strings.Contains(c["reason"].(string), "[Intutic Governance] BLOCKED:") {
		t.Fatalf("%d %v", status, out)
	}
}

func TestWorkflowNeedsApproval(t *testing.T) {
	f := newAPI(t, gatetest.CodingAgents(t))
	cases := []struct {
		body   string
		status int
		check  func(map[string]any) bool
	}{
		{`{"toolName":"read","input":{"file_path":"a"}}`, 200, func(o map[string]any) bool { return o["needsApproval"] == false }},
		{`{"toolName":"read","input":{},"onAllow":"human"}`, 200, func(o map[string]any) bool { return o["needsApproval"] == true }},
		{`{"toolName":"mcp__deploy__run","input":{}}`, 200, func(o map[string]any) bool { return o["needsApproval"] == true }},
		{`{"toolName":"bash","toolCallId":"c1","input":{"command":"rm -rf /"}}`, 403, func(o map[string]any) bool {
			return o["name"] == "FatalError" && o["fatal"] == true && o["code"] == "destructive_command" &&
				o["message"] == "[Intutic Governance] BLOCKED: destructive command on the root filesystem" &&
				o["reason"] == "destructive command on the root filesystem" && o["incidentId"] != ""
		}},
		{`{"toolName":"read","onAllow":"sometimes"}`, 400, func(o map[string]any) bool { return strings.Contains(o["error"].(string), "onAllow") }},
	}
	for _, tc := range cases {
		status, out := f.call(t, "POST", "/v1/workflow/needs-approval", tok, tc.body)
		if status != tc.status || !tc.check(out) {
			t.Errorf("%s: %d %v", tc.body, status, out)
		}
	}
	// The gate's own failure is not a refusal: 503, so the durable step retries.
	g := newAPI(t, gate.New(""))
	if status, out := g.call(t, "POST", "/v1/workflow/needs-approval", tok, `{"toolName":"read"}`); status != 503 || out["code"] != gate.CodeSnapshotMissing {
		t.Fatalf("%d %v", status, out)
	}
}

// TestProbesAndMetrics: the probes answer on the API port and say only whether the confirmer
// is ready and, when not, the code of why: never the snapshot's digest. /metrics is served on
// its own listener, never on the API port.
func TestProbesAndMetrics(t *testing.T) {
	empty := newAPI(t, gate.New(""))
	if status, out := empty.call(t, "GET", "/readyz", "", ""); status != 503 || out["ready"] != false || out["reason"] != gate.CodeSnapshotMissing || len(out) != 2 {
		t.Fatalf("readyz without a snapshot: %d %v", status, out)
	}
	f := newAPI(t, gatetest.CodingAgents(t))
	if status, _ := f.call(t, "GET", "/healthz", "", ""); status != 200 {
		t.Fatal(status)
	}
	if status, out := f.call(t, "GET", "/readyz", "", ""); status != 200 || out["ready"] != true || len(out) != 1 {
		t.Fatalf("readyz: %d %v, want only ready", status, out)
	}
	f.call(t, "POST", "/v1/guard", tok, `{"tool":"read"}`)
	if status, _ := f.call(t, "GET", "/metrics", "", ""); status != http.StatusNotFound {
		t.Fatalf("/metrics on the API port: %d, want 404", status)
	}
	if status, _ := f.call(t, "GET", "/metrics", tok, ""); status != http.StatusNotFound {
		t.Fatalf("/metrics on the API port with a token: %d, want 404", status)
	}
	raw := scrape(t, f)
	if !strings.Contains(raw, `gate_decisions_total{mode="enforce",surface="api",verdict="Allow"} 1`) {
		t.Fatalf("metrics lack the decision counter:\n%s", raw)
	}
	resp, err := http.Get(f.metrics.URL + "/v1/harness/settings")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the metrics listener serves the API: %d", resp.StatusCode)
	}
}

// TestHarnessSettings: GET /v1/harness/settings answers the bundle's two harness files as
// they are, under the keys that say where each goes, and refuses rather than answer half.
func TestHarnessSettings(t *testing.T) {
	f := newAPI(t, gatetest.CodingAgents(t))
	if status, _ := f.call(t, "GET", "/v1/harness/settings", "", ""); status != 401 {
		t.Fatalf("settings without a token: %d", status)
	}
	status, out := f.call(t, "GET", "/v1/harness/settings", tok, "")
	got, _ := json.Marshal(out)
	if want := `{"networkPolicy":{"mode":"deny-all"},"settings":{"inactiveTools":["bash"],"permissionMode":"allow-edits"}}`; status != 200 || string(got) != want {
		t.Fatalf("%d %s, want %s", status, got, want)
	}

	write := func(key, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(f.bundleDir, key), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(bootstrap.KeyHarnessSettings, `["not", "an", "object"]`)
	if status, out := f.call(t, "GET", "/v1/harness/settings", tok, ""); status != 503 || out["error"] != "the harness settings are not valid JSON" {
		t.Fatalf("settings that are not an object: %d %v", status, out)
	}
	write(bootstrap.KeyHarnessSettings, `{"permissionMode":"allow-reads"}`)
	if err := os.Remove(filepath.Join(f.bundleDir, bootstrap.KeyHarnessNetworkPolicy)); err != nil {
		t.Fatal(err)
	}
	if status, out := f.call(t, "GET", "/v1/harness/settings", tok, ""); status != 503 || out["error"] != "the harness settings are not available" {
		t.Fatalf("without the network policy: %d %v", status, out)
	}
}

// TestHarnessApprovalsDuplicateID: the same approvalId twice in one request would get two
// answers, possibly contradictory (the second call may be decided on a different snapshot);
// the request is refused, naming the id, and nothing is decided.
func TestHarnessApprovalsDuplicateID(t *testing.T) {
	f := newAPI(t, gatetest.CodingAgents(t))
	body := `{"pendingApprovals":[
		{"approvalId":"appr_1","toolCallId":"call_1","toolName":"read","input":"{}","kind":"builtin"},
		{"approvalId":"appr_2","toolCallId":"call_2","toolName":"read","input":"{}","kind":"builtin"},
		{"type":"tool-approval-request","approvalId":"appr_1","toolCall":{"type":"tool-call","toolCallId":"call_3","toolName":"bash","input":{"command":"rm -rf /"}}}
	]}`
	status, out := f.call(t, "POST", "/v1/harness/approvals", tok, body)
	if status != 400 || !strings.Contains(out["error"].(string), `"appr_1"`) || !strings.Contains(out["error"].(string), "pendingApprovals[2]") {
		t.Fatalf("%d %v, want 400 naming appr_1", status, out)
	}
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if n := len(mf.GetMetric()); mf.GetName() == "gate_decisions_total" && n != 0 {
			t.Fatalf("%d decision series for a refused request", n)
		}
	}
}
