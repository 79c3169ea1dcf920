//go:build conformance

package conformance

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateapi"
)

// TestHarness feeds the continuations of POST /v1/harness/approvals to @ai-sdk/harness, for
// both forms a pending approval takes: a stream part and a suspended-session row.
func TestHarness(t *testing.T) {
	g := loadGate(t, []gate.Rule{{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.contains("rm -rf /")`, Action: gate.Block, Reason: "destructive command on the root filesystem"}})
	srv := httptest.NewServer((&gateapi.API{Gate: g, Log: logr.Discard()}).Handler())
	defer srv.Close()

	pending := `{"pendingApprovals":[
		{"type":"tool-approval-request","approvalId":"toolu_01STREAM","toolCall":{"type":"tool-call","toolCallId":"toolu_01STREAM","toolName":"bash","input":{"command":"rm -rf /"},"providerExecuted":true}},
		{"approvalId":"toolu_01ROW","toolCallId":"toolu_01ROW","toolName":"read","input":"{\"file_path\":\"README.md\"}","kind":"builtin","providerExecuted":true,"nativeName":"Read"}
	]}`
	resp, err := http.Post(srv.URL+"/v1/harness/approvals", "application/json", strings.NewReader(pending))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Continuations json.RawMessage `json:"toolApprovalContinuations"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	in, _ := json.Marshal(map[string]any{
		"continuations": out.Continuations,
		"calls": []map[string]any{
			{"kind": "stream part", "approvalId": "toolu_01STREAM", "toolCallId": "toolu_01STREAM", "toolName": "bash", "input": map[string]any{"command": "rm -rf /"}, "approved": false},
			{"kind": "pending row with a string input", "approvalId": "toolu_01ROW", "toolCallId": "toolu_01ROW", "toolName": "read", "input": map[string]any{"file_path": "README.md"}, "approved": true},
		},
	})
	for _, c := range cases(t, node(t, "harness.mjs", nil, in)) {
		record(t, "@ai-sdk/harness", c.Case, c.OK, string(c.Detail))
	}
}
