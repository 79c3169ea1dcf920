package confirm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
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
	var audit []AuditRecord
	c.Audit = func(r AuditRecord) { audit = append(audit, r) }
	if _, err := c.AnswerSession(context.Background(), "sesn_x"); err != nil {
		t.Fatal(err)
	}
	got := confirmations(t, f, "sesn_x")[ids[0]]
	if !strings.HasPrefix(got, "deny:"+gate.RefusalPrefix+"the tool input") {
		t.Fatalf("confirmation %q, want a deny with the refusal message", got)
	}
	if len(audit) != 1 || audit[0].Code != gate.CodeInputInvalid || audit[0].Verdict != "Block" {
		t.Fatalf("audit %+v", audit)
	}
}
