package claudecode_test

import (
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/claudecode"
)

// TestAnswer: the whole answer is the answer line when there is a token, then HookResponse's
// stdout; its message and a newline on stderr; its exit status.
func TestAnswer(t *testing.T) {
	block := gate.Refuse(gate.CodeInputInvalid, "no")
	deny := `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"[Intutic Governance] BLOCKED: no"}}` + "\n"
	for _, tc := range []struct {
		name           string
		d              gate.Decision
		token          string
		explicit       bool
		stdout, stderr string
		exit           int
	}{
		{"allow", gate.Decision{Verdict: gate.Allow}, "", false, "", "", 0},
		{"allow with a token", gate.Decision{Verdict: gate.Allow}, "t-1", false, "gate-answer t-1\n", "", 0},
		{"explicit allow", gate.Decision{Verdict: gate.Allow, Reason: "fine"}, "", true, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"fine"}}` + "\n", "", 0},
		{"block", block, "", false, deny, "[Intutic Governance] BLOCKED: no\n", 2},
		{"block with a token", block, "t-1", false, "gate-answer t-1\n" + deny, "[Intutic Governance] BLOCKED: no\n", 2},
	} {
		stdout, stderr, exit := claudecode.Answer(tc.d, tc.token, tc.explicit)
		if string(stdout) != tc.stdout || string(stderr) != tc.stderr || exit != tc.exit {
			t.Errorf("%s: %q %q %d, want %q %q %d", tc.name, stdout, stderr, exit, tc.stdout, tc.stderr, tc.exit)
		}
	}
}
