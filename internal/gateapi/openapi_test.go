package gateapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

// openAPIDoc is openapi.yaml, loaded and validated as OpenAPI 3.1 by kin-openapi.
func openAPIDoc(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPIDocument)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() || doc.IsOpenAPI32OrLater() {
		t.Fatalf("openapi.yaml is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	return doc
}

// contract validates every exchange of a test against the document: each request that the
// document admits, and each response, whatever the request. A request the document refuses
// must be refused by the server too (4xx): the document never admits less than the handlers
// refuse, and what it says the handlers refuse, they refuse.
type contract struct {
	t      *testing.T
	router routers.Router
	// covered are the operation and status pairs seen, "GET /readyz 503".
	covered map[string]bool
}

func newContract(t *testing.T) *contract {
	doc := openAPIDoc(t)
	doc.Servers = nil // the tests' servers are on loopback ports; routes match on the path alone
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &contract{t: t, router: router, covered: map[string]bool{}}
}

var contractOptions = &openapi3filter.Options{
	// The document's one security scheme is the bearer token; the handlers decide whether it
	// is valid, the document only that one is sent.
	AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
		if token, ok := strings.CutPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer "); !ok || token == "" {
			return errors.New("no bearer token")
		}
		return nil
	},
	IncludeResponseStatus: true, // a status the document does not list is a failure
	MultiError:            true,
}

// exchange sends one request to srv and checks it and its answer against the document;
// wantRequestValid says whether the document should admit the request.
func (c *contract) exchange(srv *httptest.Server, method, path, body string, wantRequestValid bool, header ...string) (int, http.Header, []byte) {
	t := c.t
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rt, params, err := c.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s: not in openapi.yaml: %v", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: rt, Options: contractOptions}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	// ValidateRequest read the body; send it again.
	req.Body = io.NopCloser(strings.NewReader(body))
	if reqErr == nil != wantRequestValid {
		t.Errorf("%s %s %.60s: the document admits the request: %v, want %v (%v)", method, path, body, reqErr == nil, wantRequestValid, reqErr)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if reqErr != nil && (resp.StatusCode < 400 || resp.StatusCode >= 500) {
		t.Errorf("%s %s %.60s: the document refuses the request, the server answered %d %s", method, path, body, resp.StatusCode, raw)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Options: contractOptions}
	out.SetBodyBytes(raw)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s %.60s: the answer %d %s is not as the document says: %v", method, path, body, resp.StatusCode, bytes.TrimSpace(raw), err)
	}
	c.covered[rt.Method+" "+rt.Path+" "+strconv.Itoa(resp.StatusCode)] = true
	return resp.StatusCode, resp.Header, raw
}

// TestOpenAPIContract drives every route of the API through every status the document lists
// for it, on the servers the other tests use (the TokenReview faked by fakeReviewer, the
// ToolApprovals on controller-runtime's fake client), and validates each request and answer
// against openapi.yaml with kin-openapi; then it checks that every operation and status of the
// document was seen, so neither can drift from the other.
func TestOpenAPIContract(t *testing.T) {
	c := newContract(t)
	ctx := context.Background()
	f := newAPI(t, gatetest.CodingAgents(t))
	empty := newAPI(t, gate.New(""))
	lane, cl := approvalAPI(t, interceptor.Funcs{}, true)
	plain, _ := approvalAPI(t, interceptor.Funcs{}, false)
	down, _ := approvalAPI(t, interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
		return errors.New("the API server is down")
	}}, true)
	unreadable, _ := approvalAPI(t, interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return errors.New("the API server is down")
	}}, true)
	optIn := []string{HeaderHumanApproval, "create"}
	expect := func(what string, got, want int, raw []byte) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %d %s, want %d", what, got, raw, want)
		}
	}
	valid := func(srv *httptest.Server, method, path, bearer, body string, want int, header ...string) []byte {
		t.Helper()
		if bearer != "" {
			header = append(header, "Authorization", "Bearer "+bearer)
		}
		status, _, raw := c.exchange(srv, method, path, body, true, header...)
		expect(method+" "+path+" "+body, status, want, raw)
		return raw
	}
	invalid := func(srv *httptest.Server, method, path, bearer, body string, want int, header ...string) {
		t.Helper()
		if bearer != "" {
			header = append(header, "Authorization", "Bearer "+bearer)
		}
		status, _, raw := c.exchange(srv, method, path, body, false, header...)
		expect(method+" "+path+" "+body, status, want, raw)
	}

	// Probes and the document.
	valid(f.srv, "GET", "/healthz", "", "", 200)
	valid(f.srv, "GET", "/readyz", "", "", 200)
	valid(empty.srv, "GET", "/readyz", "", "", 503)
	valid(f.srv, "GET", "/openapi.yaml", "", "", 200)

	// Every authenticated route: no token, a token that is not valid, a caller not on the
	// allow-list, a review that failed.
	authed := []struct{ method, path, body string }{
		{"POST", "/v1/guard", `{"tool":"read"}`},
		{"POST", "/v1/harness/approvals", `{"pendingApprovals":[]}`},
		{"POST", "/v1/workflow/needs-approval", `{"toolName":"read"}`},
		{"GET", "/v1/harness/settings", ""},
		{"GET", "/v1/approvals/some-approval", ""},
	}
	for _, r := range authed {
		invalid(f.srv, r.method, r.path, "", r.body, 401)
		valid(f.srv, r.method, r.path, "nonsense", r.body, 401)
		valid(f.srv, r.method, r.path, "user-token", r.body, 403)
		valid(f.srv, r.method, r.path, "broken", r.body, 503)
	}

	// POST /v1/guard.
	valid(f.srv, "POST", "/v1/guard", tok, `{"tool":"Bash","input":{"command":"rm -rf /"},"surface":"harness","session":"s1"}`, 200)
	valid(f.srv, "POST", "/v1/guard", tok, `{"tool":"read","input":"{\"file_path\":\"a\"}"}`, 200)
	valid(f.srv, "POST", "/v1/guard", tok, `{"tool":"mcp__deploy__run","input":{}}`, 200)
	valid(empty.srv, "POST", "/v1/guard", tok, `{"tool":"read"}`, 200)
	// A layered bundle's decision names its layers, as the document says.
	layered := newAPI(t, gatetest.Layered(t))
	if raw := valid(layered.srv, "POST", "/v1/guard", tok, `{"tool":"Bash","input":{"command":"curl https://example.com"}}`, 200); !bytes.Contains(raw, []byte(`"layer":"ClusterHarnessAgentPolicy/baseline"`)) {
		t.Errorf("a cluster layer's Block does not name its layer: %s", raw)
	}
	invalid(f.srv, "POST", "/v1/guard", tok, `{"tool":"x","allowAll":true}`, 400)
	invalid(f.srv, "POST", "/v1/guard", tok, `{"input":{}}`, 400)
	invalid(f.srv, "POST", "/v1/guard", tok, `{"tool":"x","surface":"browser"}`, 400)
	// kin-openapi reads the first JSON value alone; the handler refuses what follows it.
	valid(f.srv, "POST", "/v1/guard", tok, `{"tool":"x"} {"tool":"y"}`, 400)

	// POST /v1/harness/approvals.
	valid(f.srv, "POST", "/v1/harness/approvals", tok, `{"pendingApprovals":[
		{"type":"tool-approval-request","approvalId":"toolu_1","toolCall":{"type":"tool-call","toolCallId":"toolu_1","toolName":"bash","input":{"command":"rm -rf /"},"providerExecuted":true}},
		{"approvalId":"toolu_2","toolCallId":"toolu_2","toolName":"read","input":"{\"file_path\":\"README.md\"}","kind":"builtin","nativeName":"Read"},
		{"approvalId":"appr_3","toolCallId":"call_3","toolName":"mcp__deploy__run","input":"{}","kind":"custom","providerExecuted":false}
	],"session":"hsess_1"}`, 200)
	valid(empty.srv, "POST", "/v1/harness/approvals", tok, `{"pendingApprovals":[{"approvalId":"a","toolCallId":"a","toolName":"read","input":"{}","kind":"builtin"}]}`, 200)
	invalid(f.srv, "POST", "/v1/harness/approvals", tok, `{"pendingApprovals":[{"approvalId":"x"}]}`, 400)
	invalid(f.srv, "POST", "/v1/harness/approvals", tok, `{"pendingApprovals":[{"approvalId":"x","toolCallId":"x","toolName":"read","extra":1}]}`, 400)
	invalid(lane, "POST", "/v1/harness/approvals", tok, harnessBody, 400, HeaderHumanApproval, "please")
	valid(plain, "POST", "/v1/harness/approvals", tok, harnessBody, 400, optIn...)
	valid(down, "POST", "/v1/harness/approvals", tok, harnessBody, 503, optIn...)
	raw := valid(lane, "POST", "/v1/harness/approvals", tok, harnessBody, 200, optIn...)
	harnessName, _ := decode(t, raw)["pending"].([]any)[0].(map[string]any)["approvalName"].(string)

	// POST /v1/workflow/needs-approval.
	valid(f.srv, "POST", "/v1/workflow/needs-approval", tok, `{"toolName":"read","input":{"file_path":"a"}}`, 200)
	valid(f.srv, "POST", "/v1/workflow/needs-approval", tok, `{"toolName":"read","input":{},"onAllow":"human"}`, 200)
	valid(f.srv, "POST", "/v1/workflow/needs-approval", tok, `{"toolName":"bash","toolCallId":"c1","input":{"command":"rm -rf /"}}`, 403)
	valid(empty.srv, "POST", "/v1/workflow/needs-approval", tok, `{"toolName":"read"}`, 503)
	valid(down, "POST", "/v1/workflow/needs-approval", tok, workflowBody, 503, optIn...)
	invalid(f.srv, "POST", "/v1/workflow/needs-approval", tok, `{"toolName":"read","onAllow":"sometimes"}`, 400)
	invalid(f.srv, "POST", "/v1/workflow/needs-approval", tok, `{"input":{}}`, 400)
	status, hdr, raw := c.exchange(lane, "POST", "/v1/workflow/needs-approval", workflowBody, true, append([]string{"Authorization", "Bearer " + tok}, optIn...)...)
	workflowName, _ := decode(t, raw)["approvalName"].(string)
	if status != 200 || workflowName == "" || hdr.Get(HeaderApprovalName) != workflowName {
		t.Fatalf("workflow with the opt-in: %d %v %s", status, hdr, raw)
	}

	// GET /v1/approvals/{name}.
	valid(lane, "GET", "/v1/approvals/"+workflowName, tok, "", 200)
	valid(lane, "GET", "/v1/approvals/"+harnessName, tok, "", 200)
	valid(lane, "GET", "/v1/approvals/nothing-0000000000", tok, "", 404)
	valid(plain, "GET", "/v1/approvals/x", tok, "", 404)
	valid(unreadable, "GET", "/v1/approvals/"+workflowName, tok, "", 503)
	// An object of the call's name this confirmer did not write for it: 409, on the POSTs and
	// on GET.
	for _, name := range []string{workflowName, harnessName} {
		ta := &gatev1.ToolApproval{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "agents", Name: name}, ta); err != nil {
			t.Fatal(err)
		}
		ta.Spec.Input.Preview = `{"env":"staging"}`
		if err := cl.Update(ctx, ta); err != nil {
			t.Fatal(err)
		}
		valid(lane, "GET", "/v1/approvals/"+name, tok, "", 409)
	}
	valid(lane, "POST", "/v1/workflow/needs-approval", tok, workflowBody, 409, optIn...)
	valid(lane, "POST", "/v1/harness/approvals", tok, harnessBody, 409, optIn...)

	// POST /v1/hook/approvals: the opt-in header is required, so it is sent with every token.
	invalid(lane, "POST", "/v1/hook/approvals", "", heldCall, 401, optIn...)
	valid(lane, "POST", "/v1/hook/approvals", "nonsense", heldCall, 401, optIn...)
	valid(lane, "POST", "/v1/hook/approvals", "broken", heldCall, 503, optIn...)
	hookName, _ := decode(t, valid(lane, "POST", "/v1/hook/approvals", podTok, heldCall, 200, optIn...))["name"].(string)
	valid(lane, "POST", "/v1/hook/approvals", tok, heldCall, 403, optIn...)
	valid(lane, "POST", "/v1/hook/approvals", podTok, hookBody("agents/other", "ls"), 409, optIn...)
	valid(down, "POST", "/v1/hook/approvals", podTok, heldCall, 503, optIn...)
	invalid(lane, "POST", "/v1/hook/approvals", podTok, heldCall, 400)
	invalid(lane, "POST", "/v1/hook/approvals", podTok, strings.Replace(heldCall, `"verdict":"Ask"`, `"verdict":"Allow"`, 1), 400, optIn...)
	valid(lane, "GET", "/v1/approvals/"+hookName, tok, "", 200)

	// GET /v1/harness/settings.
	valid(f.srv, "GET", "/v1/harness/settings", tok, "", 200)
	if err := os.Remove(filepath.Join(f.bundleDir, bootstrap.KeyHarnessNetworkPolicy)); err != nil {
		t.Fatal(err)
	}
	valid(f.srv, "GET", "/v1/harness/settings", tok, "", 503)

	// POST /v1/webhooks/anthropic.
	now := time.Now().Unix()
	hook := func(srv *httptest.Server, id, body, sig string, want int, wantValid bool) {
		t.Helper()
		h := []string{"webhook-id", id, "webhook-timestamp", strconv.FormatInt(now, 10), "webhook-signature", sig}
		status, _, raw := c.exchange(srv, "POST", "/v1/webhooks/anthropic", body, wantValid, h...)
		expect("webhook "+id, status, want, raw)
	}
	event := func(session, typ string) string {
		return `{"id":"wevt_1","created_at":"2026-12-01T00:00:00Z","type":"event","data":{"id":"` + session + `","organization_id":"o","workspace_id":"w","type":"` + typ + `"}}`
	}
	signed := func(id, body string) string { return signV1(rawKey, id, now, body) }
	body := event("sesn_wh", "session.requires_action")
	hook(f.srv, "msg_1", body, "v1,Zm9yZ2Vk", 401, true)
	hook(f.srv, "msg_2", "not json", signed("msg_2", "not json"), 400, false)
	hook(f.srv, "msg_3", body, signed("msg_3", body), 202, true)
	hook(f.srv, "msg_3", body, signed("msg_3", body), 200, true)
	other := event("sesn_wh", "session.running")
	hook(f.srv, "msg_4", other, signed("msg_4", other), 200, true)
	big := `{"type":"event","data":{"type":"x","pad":"` + strings.Repeat("a", maxWebhookBody) + `"}}`
	hook(f.srv, "msg_5", big, signed("msg_5", big), 413, true)
	hook(plain, "msg_6", body, signed("msg_6", body), 404, true)
	// The queue holds 4 sessions and no worker runs here: sesn_wh and three more fill it.
	for i := range 3 {
		b := event(fmt.Sprintf("sesn_q%d", i), "session.requires_action")
		hook(f.srv, fmt.Sprintf("msg_q%d", i), b, signed(fmt.Sprintf("msg_q%d", i), b), 202, true)
	}
	b := event("sesn_q3", "session.requires_action")
	hook(f.srv, "msg_q3", b, signed("msg_q3", b), 503, true)
	if status, _, raw := c.exchange(f.srv, "POST", "/v1/webhooks/anthropic", body, false); status != 401 {
		t.Errorf("a webhook without its headers: %d %s", status, raw)
	}

	// Every operation and status of the document was seen, but the 500 of an answer that
	// cannot be encoded (a bug; TestWriteJSONStatusEncodingFailure shows its body).
	var missing []string
	for path, item := range openAPIDoc(t).Paths.Map() {
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				key := method + " " + path + " " + status
				if status != "500" && !c.covered[key] {
					missing = append(missing, key)
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("statuses of the document no exchange produced:\n%s", strings.Join(missing, "\n"))
	}
}

// TestWriteJSONStatusEncodingFailure: the 500 every JSON route documents is the error body.
func TestWriteJSONStatusEncodingFailure(t *testing.T) {
	w := httptest.NewRecorder()
	writeJSONStatus(w, http.StatusOK, map[string]any{"x": func() {}})
	if w.Code != 500 || w.Body.String() != `{"error":"the response could not be encoded"}`+"\n" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// TestOpenAPIRoutes: the routes Handler registers are the operations of the document, no
// more and no fewer, and the document is what GET /openapi.yaml serves.
func TestOpenAPIRoutes(t *testing.T) {
	doc := openAPIDoc(t)
	var documented, registered []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	for _, rt := range (&API{}).routes() {
		registered = append(registered, rt.pattern)
	}
	sort.Strings(documented)
	sort.Strings(registered)
	if !slices.Equal(documented, registered) {
		t.Fatalf("the document's operations:\n%s\nthe routes registered:\n%s", strings.Join(documented, "\n"), strings.Join(registered, "\n"))
	}
	f := newAPI(t, gatetest.CodingAgents(t))
	status, hdr, raw := do(t, f.srv, "GET", "/openapi.yaml", "", "")
	if status != 200 || hdr.Get("Content-Type") != "application/yaml" || !bytes.Equal(raw, OpenAPIDocument) {
		t.Fatalf("GET /openapi.yaml: %d %s, %d bytes", status, hdr.Get("Content-Type"), len(raw))
	}
}

// TestOpenAPIEnums: the document's enums are the code's constants. The gate's own codes are
// read from internal/gate's source, so a new code fails here until the document names it.
func TestOpenAPIEnums(t *testing.T) {
	schemas := openAPIDoc(t).Components.Schemas
	enum := func(name string) []string {
		t.Helper()
		s, ok := schemas[name]
		if !ok || s.Value == nil {
			t.Fatalf("no schema %s", name)
		}
		var out []string
		for _, v := range s.Value.Enum {
			out = append(out, fmt.Sprint(v))
		}
		sort.Strings(out)
		return out
	}
	sorted := func(v ...string) []string { sort.Strings(v); return v }
	codes := gateCodeConstants(t)
	var retryable, snapshot []string
	for code := range retryableCodes {
		retryable = append(retryable, code)
	}
	for _, code := range codes {
		if strings.HasPrefix(code, "snapshot_") {
			snapshot = append(snapshot, code)
		}
	}
	for name, want := range map[string][]string{
		"GateCode":      sorted(codes...),
		"RetryableCode": sorted(retryable...),
		"SnapshotCode":  sorted(snapshot...),
		"Verdict":       sorted(string(gate.Allow), string(gate.Ask), string(gate.Block)),
		"Surface":       sorted(gate.SurfaceHook, gate.SurfaceHarness, gate.SurfaceWorkflow, gate.SurfaceManagedAgents, gate.SurfaceAPI),
		"ApprovalState": sorted(string(gatev1.ApprovalPending), string(gatev1.ApprovalApproved), string(gatev1.ApprovalDenied), string(gatev1.ApprovalExpired), string(gatev1.ApprovalAnsweredInRuntime)),
	} {
		if got := enum(name); !slices.Equal(got, want) {
			t.Errorf("%s: the document has %v, the code %v", name, got, want)
		}
	}
	if c := schemas["ApprovalNotTrusted"].Value.Properties["code"].Value.Const; c != CodeApprovalNotTrusted {
		t.Errorf("ApprovalNotTrusted.code is %v, want %s", c, CodeApprovalNotTrusted)
	}
}

// gateCodeConstants are the values of internal/gate's exported Code* string constants.
func gateCodeConstants(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("..", "gate", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "Code") || !id.IsExported() || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						codes = append(codes, v)
					}
				}
			}
		}
	}
	if len(codes) == 0 {
		t.Fatal("no Code constants found in internal/gate")
	}
	return codes
}
