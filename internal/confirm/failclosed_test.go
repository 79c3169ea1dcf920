package confirm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

// TestConfirmerUndecodableInputIsDenied: the Managed Agents confirmer denies a call whose
// input does not decode, with the refusal message, as for any other Block.
func TestConfirmerUndecodableInputIsDenied(t *testing.T) {
	f := newFake(t)
	ids := f.AddSession("sesn_x", "agent_1", anthropictest.ToolUse{Name: "write", Permission: "ask",
		Input: map[string]any{"file_path": "/etc/cron.d/x", "content": "x", "n": json.RawMessage("1e999")}})
	c := newConfirmer(t, f)
	c.Gate = gatetest.NoEtcWrites(t)
	var decided decisionlog.Memory
	c.Decisions = decisionlog.New(nil, decisionlog.Source{}, nil, &decided)
	if _, err := c.AnswerSession(context.Background(), "sesn_x"); err != nil {
		t.Fatal(err)
	}
	got := confirmations(t, f, "sesn_x")[ids[0]]
	if !strings.HasPrefix(got, "deny:"+gate.RefusalPrefix+"the tool input") {
		t.Fatalf("confirmation %q, want a deny with the refusal message", got)
	}
	if audit := decided.Records(); len(audit) != 1 || audit[0].Code != gate.CodeInputInvalid || audit[0].Verdict != "Block" {
		t.Fatalf("audit %+v", audit)
	}
}

// TestMCPCallWithoutServerIsDenied: an agent.mcp_tool_use that names no MCP server is not
// judged as the built-in tool of the same name (a server could pose as "bash"): it is denied.
func TestMCPCallWithoutServerIsDenied(t *testing.T) {
	f := newFake(t)
	ids := f.AddSession("sesn_m", "agent_1", anthropictest.ToolUse{Type: "agent.mcp_tool_use", Name: "read", Permission: "ask",
		Input: map[string]any{"file_path": "/workspace/x"}})
	c := newConfirmer(t, f)
	c.Gate = gatetest.NoEtcWrites(t) // would allow a built-in read
	if _, err := c.AnswerSession(context.Background(), "sesn_m"); err != nil {
		t.Fatal(err)
	}
	if got := confirmations(t, f, "sesn_m")[ids[0]]; !strings.HasPrefix(got, "deny:"+gate.RefusalPrefix+"an MCP tool call names no MCP server") {
		t.Fatalf("confirmation %q, want a deny", got)
	}
}
