package gateapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

// TestHarnessUndecodableInputIsRefused: an approval whose input the gate cannot decode as the
// harness would (1e999 is Infinity to Node, text is not JSON, nesting is too deep for Go) is
// refused, never evaluated as {"args": [text]} and approved.
func TestHarnessUndecodableInputIsRefused(t *testing.T) {
	f := newAPI(t, gatetest.NoEtcWrites(t))
	quoted := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	rows := map[string]string{
		"row, number out of float64 range":  `{"approvalId":"a","toolCallId":"a","toolName":"write","kind":"builtin","input":` + quoted(`{"file_path":"/etc/cron.d/x","content":"x","n":1e999}`) + `}`,
		"row, plain text":                   `{"approvalId":"a","toolCallId":"a","toolName":"write","kind":"builtin","input":` + quoted(`ls -la`) + `}`,
		"row, nested too deep":              `{"approvalId":"a","toolCallId":"a","toolName":"write","kind":"builtin","input":` + quoted(`{"file_path":"/etc/cron.d/x","n":`+deep+`}`) + `}`,
		"part, number out of float64 range": `{"type":"tool-approval-request","approvalId":"a","toolCall":{"type":"tool-call","toolCallId":"a","toolName":"write","input":{"file_path":"/etc/cron.d/x","n":1e999}}}`,
		"part, unparsed text":               `{"type":"tool-approval-request","approvalId":"a","toolCall":{"type":"tool-call","toolCallId":"a","toolName":"write","input":` + quoted(`{"file_path":"/etc/cron.d/x"`) + `}}`,
	}
	for name, row := range rows {
		t.Run(name, func(t *testing.T) {
			status, out := postUseNumber(t, f, "/v1/harness/approvals", `{"pendingApprovals":[`+row+`]}`)
			conts, _ := out["toolApprovalContinuations"].([]any)
			if status != 200 || len(conts) != 1 {
				t.Fatalf("%d %v", status, out)
			}
			c := conts[0].(map[string]any)
			if c["approved"] != false || !strings.HasPrefix(c["reason"].(string), gate.RefusalPrefix+"the tool input") {
				t.Fatalf("want a refusal of the input, got %v", c)
			}
		})
	}
}

// postUseNumber is apiFixture.call for a response that echoes a number Go cannot hold in a
// float64 (the continuation's toolCall carries the input as it came).
func postUseNumber(t *testing.T, f *apiFixture, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp.StatusCode, out
}

// TestStrictRequestDecoding: request bodies are read as the JavaScript that sent them reads
// them back: a field named in another case is not an alias, and nothing follows the value.
func TestStrictRequestDecoding(t *testing.T) {
	f := newAPI(t, gatetest.CodingAgents(t))
	for _, c := range []struct{ path, body string }{
		{"/v1/guard", `{"tool":"bash","TOOL":"read","input":{"command":"rm -rf /"}}`},
		{"/v1/guard", `{"Tool":"read"}`},
		{"/v1/guard", `{"tool":"read"}}`},
		{"/v1/guard", `{"tool":"read"}]`},
		{"/v1/guard", `{"tool":"bash","tool":"read"}`},
		{"/v1/workflow/needs-approval", `{"toolName":"read"}}`},
		{"/v1/workflow/needs-approval", `{"toolName":"bash","ToolName":"read"}`},
		{"/v1/harness/approvals", `{"pendingApprovals":[{"approvalId":"a","toolCallId":"a","toolName":"read","input":"{}","Kind":"custom"}]}`},
		{"/v1/harness/approvals", `{"pendingApprovals":[]}]`},
	} {
		if status, out := f.call(t, "POST", c.path, tok, c.body); status != 400 {
			t.Errorf("%s %s: %d %v, want 400", c.path, c.body, status, out)
		}
	}
}
