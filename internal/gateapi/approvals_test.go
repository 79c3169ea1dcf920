package gateapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/approvals"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

// approvalAPI serves the gate with the human lane on controller-runtime's fake client (the
// confirmer's cache is the client itself here); funcs intercept its calls.
func approvalAPI(t *testing.T, funcs interceptor.Funcs, withApprovals bool) (*httptest.Server, client.Client) {
	t.Helper()
	srv, cl, _ := approvalAPIOf(t, funcs, withApprovals)
	return srv, cl
}

// approvalAPIOf is approvalAPI, with the API it serves.
func approvalAPIOf(t *testing.T, funcs interceptor.Funcs, withApprovals bool) (*httptest.Server, client.Client, *API) {
	t.Helper()
	s := runtime.NewScheme()
	if err := gatev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&gatev1.ToolApproval{}).WithInterceptorFuncs(funcs).Build()
	api := &API{
		Gate: gatetest.CodingAgents(t),
		Auth: &Authenticator{Reviewer: fakeReviewer{tok: "system:serviceaccount:agents:orchestrator",
			podTok: "system:serviceaccount:agents:coding-agent@coding-agent-0/pod-uid-1", otherPodTok: "system:serviceaccount:agents:coding-agent@coding-agent-1/pod-uid-2",
			foreignPodTok: "system:serviceaccount:other:coding-agent@coding-agent-0/pod-uid-3"},
			Allowed: []string{"agents/orchestrator", "agents/coding-agent", "other/coding-agent"}},
		Log: logr.Discard(),
	}
	if withApprovals {
		api.Approvals = &approvals.Store{Client: cl, Reader: cl, Namespace: "agents", Confirmer: "agents", ConfirmerUID: "uid-1", Policy: "coding-agents",
			Deadline: 15 * time.Minute, Log: logr.Discard()}
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv, cl, api
}

// do sends a request with the headers given and returns the status, headers and raw body.
func do(t *testing.T, srv *httptest.Server, method, path, token, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}

func decode(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return out
}

var incidentIDs = regexp.MustCompile(`"incidentId":"[^"]*"`)

const (
	harnessBody = `{"pendingApprovals":[
		{"approvalId":"toolu_2","toolCallId":"toolu_2","toolName":"read","input":"{\"file_path\":\"README.md\"}","kind":"builtin"},
		{"approvalId":"appr_3","toolCallId":"call_3","toolName":"mcp__deploy__run","input":"{\"env\":\"prod\"}","kind":"custom","providerExecuted":false}
	],"session":"hsess_1"}`
	workflowBody = `{"toolName":"mcp__deploy__run","toolCallId":"c9","input":{"env":"prod"},"session":"wrun_1"}`
)

// TestWithoutOptInNothingChanges: without Gate-Human-Approval the harness and workflow routes
// answer byte for byte as a confirmer without the human lane does (incident ids aside), and
// create no ToolApproval.
func TestWithoutOptInNothingChanges(t *testing.T) {
	with, cl := approvalAPI(t, interceptor.Funcs{}, true)
	without, _ := approvalAPI(t, interceptor.Funcs{}, false)
	for path, body := range map[string]string{"/v1/harness/approvals": harnessBody, "/v1/workflow/needs-approval": workflowBody} {
		s1, h1, b1 := do(t, with, "POST", path, tok, body)
		s2, _, b2 := do(t, without, "POST", path, tok, body)
		if s1 != 200 || s1 != s2 || incidentIDs.ReplaceAllString(string(b1), "") != incidentIDs.ReplaceAllString(string(b2), "") {
			t.Errorf("%s:\n%d %s\n%d %s", path, s1, b1, s2, b2)
		}
		if h1.Get(HeaderApprovalName) != "" || strings.Contains(string(b1), "approvalName") {
			t.Errorf("%s names an approval without the opt-in: %s", path, b1)
		}
	}
	var l gatev1.ToolApprovalList
	if err := cl.List(context.Background(), &l); err != nil || len(l.Items) != 0 {
		t.Fatalf("%d ToolApprovals created without the opt-in (%v)", len(l.Items), err)
	}
}

// TestHarnessAndWorkflowCreateApprovals: with the opt-in, each Ask verdict gets one
// ToolApproval (the same one when the request is repeated), named in the response; Allow
// verdicts get none; GET /v1/approvals/{name} follows it to its answer.
func TestHarnessAndWorkflowCreateApprovals(t *testing.T) {
	ctx := context.Background()
	srv, cl := approvalAPI(t, interceptor.Funcs{}, true)
	opt := []string{HeaderHumanApproval, "create"}

	var harnessName string
	for range 2 { // a repeated request names the same approval
		status, _, raw := do(t, srv, "POST", "/v1/harness/approvals", tok, harnessBody, opt...)
		out := decode(t, raw)
		pending := out["pending"].([]any)
		if status != 200 || len(pending) != 1 || len(out["toolApprovalContinuations"].([]any)) != 1 {
			t.Fatalf("%d %s", status, raw)
		}
		name, _ := pending[0].(map[string]any)["approvalName"].(string)
		if name == "" || (harnessName != "" && name != harnessName) {
			t.Fatalf("approvalName %q (first %q)", name, harnessName)
		}
		harnessName = name
		if strings.Contains(string(raw[strings.Index(string(raw), `"pending"`):]), "toolu_2") {
			t.Fatalf("the allowed call got an approval: %s", raw)
		}
	}
	status, hdr, raw := do(t, srv, "POST", "/v1/workflow/needs-approval", tok, workflowBody, opt...)
	out := decode(t, raw)
	workflowName, _ := out["approvalName"].(string)
	if status != 200 || out["needsApproval"] != true || workflowName == "" || hdr.Get(HeaderApprovalName) != workflowName {
		t.Fatalf("%d %v %s", status, hdr, raw)
	}
	// An Allow verdict names no approval, header or not.
	if status, hdr, raw := do(t, srv, "POST", "/v1/workflow/needs-approval", tok, `{"toolName":"read","toolCallId":"c10","input":{}}`, opt...); status != 200 ||
		hdr.Get(HeaderApprovalName) != "" || strings.Contains(string(raw), "approvalName") {
		t.Fatalf("%d %s", status, raw)
	}

	var l gatev1.ToolApprovalList
	if err := cl.List(ctx, &l); err != nil || len(l.Items) != 2 {
		t.Fatalf("%d ToolApprovals (%v), want 2", len(l.Items), err)
	}
	for name, want := range map[string]gatev1.ToolApprovalSpec{
		harnessName:  {Surface: gatev1.SurfaceHarness, SessionID: "hsess_1", ToolUseID: "appr_3"},
		workflowName: {Surface: gatev1.SurfaceWorkflow, SessionID: "wrun_1", ToolUseID: "c9"},
	} {
		ta := &gatev1.ToolApproval{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "agents", Name: name}, ta); err != nil {
			t.Fatal(err)
		}
		sp := ta.Spec
		if sp.Surface != want.Surface || sp.SessionID != want.SessionID || sp.ToolUseID != want.ToolUseID || sp.Tool != "mcp__deploy__run" ||
			sp.Rule != "deploys-need-human" || sp.Policy != "coding-agents" || sp.Input.Size != int64(len(`{"env":"prod"}`)) || sp.Input.Preview != "" {
			t.Errorf("%s: spec %+v", name, sp)
		}
		if d := time.Until(sp.ExpiresAt.Time); d < 14*time.Minute || d > 15*time.Minute {
			t.Errorf("%s expires in %s", name, d)
		}
	}

	// GET follows the approval.
	get := func(name, token string) (int, map[string]any) {
		status, _, raw := do(t, srv, "GET", "/v1/approvals/"+name, token, "")
		return status, decode(t, raw)
	}
	if status, out := get(workflowName, tok); status != 200 || out["state"] != "Pending" || out["name"] != workflowName || out["expiresAt"] == "" {
		t.Fatalf("%d %v", status, out)
	}
	answer := func(name string, state gatev1.ToolApprovalState, user, message string) {
		ta := &gatev1.ToolApproval{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "agents", Name: name}, ta); err != nil {
			t.Fatal(err)
		}
		ta.Status.State = state
		ta.Status.Decision = &gatev1.ToolApprovalDecision{User: user, Message: message, Time: &metav1.Time{Time: time.Now()}}
		meta.SetStatusCondition(&ta.Status.Conditions, metav1.Condition{Type: string(state), Status: metav1.ConditionTrue, Reason: "ByUser"})
		if err := cl.Status().Update(ctx, ta); err != nil {
			t.Fatal(err)
		}
	}
	answer(workflowName, gatev1.ApprovalDenied, "bob", "not on a Friday")
	if status, out := get(workflowName, tok); status != 200 || out["state"] != "Denied" || out["message"] != "not on a Friday" || out["user"] != "bob" {
		t.Fatalf("%d %v", status, out)
	}
	answer(harnessName, gatev1.ApprovalApproved, "", "")
	if status, out := get(harnessName, tok); status != 200 || out["state"] != "Pending" {
		t.Fatalf("an Approved without the approver recorded must read Pending: %d %v", status, out)
	}
	answer(harnessName, gatev1.ApprovalApproved, "alice", "")
	if status, out := get(harnessName, tok); status != 200 || out["state"] != "Approved" || out["user"] != "alice" {
		t.Fatalf("%d %v", status, out)
	}

	// Only this confirmer's approvals, and only for authenticated callers.
	other := &gatev1.ToolApproval{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "other-1234567890", Labels: map[string]string{gatev1.LabelConfirmer: "someone-else"}}}
	if err := cl.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"other-1234567890": 404, "nothing-0000000000": 404} {
		if status, out := get(name, tok); status != want {
			t.Errorf("%s: %d %v, want %d", name, status, out, want)
		}
	}
	if status, _, _ := do(t, srv, "GET", "/v1/approvals/"+harnessName, "", ""); status != 401 {
		t.Errorf("unauthenticated GET: %d", status)
	}
}

// TestApprovalOptInRefusals: a wrong header value, a workflow call without toolCallId, and a
// confirmer without the human lane are refused; an approval that cannot be created fails the
// request (503: harness code retries, and the durable step reads RetryableError) instead of
// leaving a call no human could ever answer.
func TestApprovalOptInRefusals(t *testing.T) {
	srv, _ := approvalAPI(t, interceptor.Funcs{}, true)
	plain, _ := approvalAPI(t, interceptor.Funcs{}, false)
	down, _ := approvalAPI(t, interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
		return errors.New("the API server is down")
	}}, true)
	cases := []struct {
		srv          *httptest.Server
		path, body   string
		header       string
		status       int
		errorContain string
	}{
		{srv, "/v1/workflow/needs-approval", workflowBody, "please", 400, "the only value is create"},
		{srv, "/v1/workflow/needs-approval", `{"toolName":"mcp__deploy__run","input":{}}`, "create", 400, "toolCallId is required"},
		{plain, "/v1/harness/approvals", harnessBody, "create", 400, "creates no ToolApprovals"},
		{down, "/v1/harness/approvals", harnessBody, "create", 503, "could not be created"},
		{down, "/v1/workflow/needs-approval", workflowBody, "create", 503, "could not be created"},
	}
	for _, c := range cases {
		status, _, raw := do(t, c.srv, "POST", c.path, tok, c.body, HeaderHumanApproval, c.header)
		if status != c.status || !strings.Contains(string(raw), c.errorContain) {
			t.Errorf("%s with %q: %d %s, want %d with %q", c.path, c.header, status, raw, c.status, c.errorContain)
		}
	}
	if _, _, raw := do(t, down, "POST", "/v1/workflow/needs-approval", tok, workflowBody, HeaderHumanApproval, "create"); decode(t, raw)["name"] != "RetryableError" {
		t.Errorf("workflow: %s", raw)
	}
	if status, _, _ := do(t, plain, "GET", "/v1/approvals/x", tok, ""); status != 404 {
		t.Errorf("GET without the human lane: %d", status)
	}
}
