package runtimes_test

import (
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/codex"
	"github.com/intutic/gate-operator/internal/runtime/gemini"
	"github.com/intutic/gate-operator/internal/runtime/runtimes"
)

// TestAnswer: the whole answer is the answer line when there is a token, then the runtime's
// stdout; its message and a newline on stderr; its exit status. Every runtime denies with exit 2,
// and a Codex or Gemini CLI Ask is a deny.
func TestAnswer(t *testing.T) {
	block := gate.Refuse(gate.CodeInputInvalid, "no")
	ask := gate.Decision{Verdict: gate.Ask, Reason: "a human decides"}
	audited := gate.Decision{Verdict: gate.Allow, Would: &gate.AuditedVerdict{Verdict: gate.Block, Reason: "would block"}}
	codexAsk := `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"[Intutic Governance] BLOCKED: a human decides` + codex.AskSuffix + `"}}`
	deny := `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"[Intutic Governance] BLOCKED: no"}}` + "\n"
	for _, tc := range []struct {
		runtime        string
		name           string
		d              gate.Decision
		token          string
		explicit       bool
		stdout, stderr string
		exit           int
	}{
		{"claude-code", "allow", gate.Decision{Verdict: gate.Allow}, "", false, "", "", 0},
		{"claude-code", "allow with a token", gate.Decision{Verdict: gate.Allow}, "t-1", false, "gate-answer t-1\n", "", 0},
		{"claude-code", "explicit allow", gate.Decision{Verdict: gate.Allow, Reason: "fine"}, "", true, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"fine"}}` + "\n", "", 0},
		{"claude-code", "block", block, "", false, deny, "[Intutic Governance] BLOCKED: no\n", 2},
		{"claude-code", "block with a token", block, "t-1", false, "gate-answer t-1\n" + deny, "[Intutic Governance] BLOCKED: no\n", 2},
		{"codex", "allow", gate.Decision{Verdict: gate.Allow}, "t-1", true, "gate-answer t-1\n", "", 0},
		{"codex", "block", block, "", false, deny, "[Intutic Governance] BLOCKED: no\n", 2},
		{"codex", "ask", ask, "", false, codexAsk + "\n", "[Intutic Governance] BLOCKED: a human decides" + codex.AskSuffix + "\n", 2},
		{"codex", "audited block", audited, "", false, "", "", 0},
		{"gemini-cli", "allow", gate.Decision{Verdict: gate.Allow}, "", false, "", "", 0},
		{"gemini-cli", "explicit allow", gate.Decision{Verdict: gate.Allow, Reason: "fine"}, "t-1", true, "gate-answer t-1\n" + `{"decision":"allow","reason":"fine"}` + "\n", "", 0},
		{"gemini-cli", "block", block, "", false, `{"decision":"deny","reason":"[Intutic Governance] BLOCKED: no"}` + "\n", "[Intutic Governance] BLOCKED: no\n", 2},
		{"gemini-cli", "ask", ask, "", false, `{"decision":"deny","reason":"[Intutic Governance] BLOCKED: a human decides` + gemini.AskSuffix + `"}` + "\n", "[Intutic Governance] BLOCKED: a human decides" + gemini.AskSuffix + "\n", 2},
	} {
		rt, ok := runtimes.Lookup(tc.runtime)
		if !ok {
			t.Fatalf("no runtime %q", tc.runtime)
		}
		stdout, stderr, exit := rt.Answer(tc.d, tc.token, tc.explicit)
		if string(stdout) != tc.stdout || string(stderr) != tc.stderr || exit != tc.exit {
			t.Errorf("%s: %q %q %d, want %q %q %d", tc.name, stdout, stderr, exit, tc.stdout, tc.stderr, tc.exit)
		}
	}
}

// TestLookup: the three runtimes are known by name, Claude Code first; any other is not.
func TestLookup(t *testing.T) {
	if got := runtimes.Names(); len(got) != 3 || got[0] != runtimes.Default || got[1] != codex.Name || got[2] != gemini.Name {
		t.Fatalf("names %v", got)
	}
	for _, n := range []string{"", "claude", "Codex", "gemini"} {
		if _, ok := runtimes.Lookup(n); ok {
			t.Errorf("%q is known", n)
		}
	}
}
