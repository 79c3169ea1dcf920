package gate_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/toolname"
)

// Fail closed: every fault ends in a refusal, never an unevaluated Allow.

// TestCostOverrunRefusedUnderIgnore: input too large for a rule to judge within the cost limit
// is refused with input_too_costly under either failure policy; it is not a rule bug to skip.
func TestCostOverrunRefusedUnderIgnore(t *testing.T) {
	block := gate.Rule{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.matches("rm\\s+-rf\\s+/")`, Action: gate.Block, Reason: "destructive command"}
	buggy := gate.Rule{Name: "needs-field", Tools: []string{"bash"}, When: `input.missing == "x"`, Action: gate.Block, Reason: "never"}
	padded := bash("rm -rf /" + strings.Repeat(" ", 4<<20))
	for _, fp := range []gate.FailurePolicy{gate.Ignore, gate.Fail} {
		g := gateFor(t, gate.PolicyMeta{FailurePolicy: fp}, block)
		d := g.Decide(padded)
		if d.Verdict != gate.Block || d.Code != gate.CodeInputTooCostly || d.Rule != "no-root-rm" || !strings.Contains(d.Reason, "cost limit") {
			t.Fatalf("%s: want an input_too_costly Block, got %+v", fp, d)
		}
	}
	// A genuine evaluation error is still skipped under Ignore.
	g := gateFor(t, gate.PolicyMeta{FailurePolicy: gate.Ignore}, buggy)
	if d := g.Decide(bash("ls")); d.Verdict != gate.Allow {
		t.Fatalf("an erroring rule under Ignore must be skipped, got %+v", d)
	}
}

// TestEvaluationErrorsDoNotQuoteInput: the reason of an erroring rule names the rule and the
// kind of error, never a value of the input; no field of the decision carries the value.
func TestEvaluationErrorsDoNotQuoteInput(t *testing.T) {
	const secret = "sk-live-SECRET-4f9a8b7c6d5e"
	cases := []struct {
		when string
		kind string
	}{
		{`timestamp(input.t) > timestamp("2020-01-01T00:00:00Z")`, "invalid_argument"},
		{`int(input.t) > 0`, "invalid_argument"},
		{`input[input.t] == "x"`, "no_such_key"},
		{`input.t + 1 == 2`, "type_mismatch"},
		{`duration(input.t) > duration("1s")`, "invalid_argument"},
		{`input.t.matches(input.t + "(")`, "invalid_argument"},
		{`9223372036854775807 + int(input.n) > 0`, "overflow"},
	}
	for _, tc := range cases {
		t.Run(tc.when, func(t *testing.T) {
			g := gateFor(t, gate.PolicyMeta{FailurePolicy: gate.Fail}, gate.Rule{Name: "r", When: tc.when, Action: gate.Allow})
			d := g.Decide(&gate.Call{Tool: "Bash", Input: map[string]any{"t": secret, "n": float64(1)}})
			b, _ := json.Marshal(d)
			if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("SECRET")) {
				t.Fatalf("the decision quotes the input: %s", b)
			}
			if want := "rule r could not be evaluated: " + tc.kind; d.Verdict != gate.Block || d.Code != gate.CodeRuleError || d.Reason != want {
				t.Fatalf("got %s, want a rule_error Block with reason %q", b, want)
			}
		})
	}
}

// TestMCPServerCannotPoseAsAnother: a tool named mcp__<a>__<t> is the tool of server a; a call
// that reports another server beside it, or a server that would join into another server's
// name, is refused, so rules written for server a never judge it.
func TestMCPServerCannotPoseAsAnother(t *testing.T) {
	g := gateFor(t, gate.PolicyMeta{DefaultAction: gate.Block}, gate.Rule{Name: "github-ok", Tools: []string{"mcp__github__*"}, Action: gate.Allow, Reason: "github is trusted"})
	cases := []struct {
		name, tool, server string
		verdict            gate.Verdict
		code               string
	}{
		{"name and server agree", "mcp__github__create_issue", "github", gate.Allow, ""},
		{"server agrees but for case", "mcp__github__create_issue", "GitHub", gate.Allow, ""},
		{"no server reported", "mcp__github__create_issue", "", gate.Allow, ""},
		{"joined", "create_issue", "github", gate.Allow, ""},
		{"another server reported", "mcp__github__create_issue", "evil", gate.Block, gate.CodeInputInvalid},
		{"a server that joins into another's name", "create_issue", "github__evil", gate.Block, gate.CodeInputInvalid},
		{"a server that ends in an underscore", "_create_issue", "github_", gate.Block, gate.CodeInputInvalid},
		{"an mcp name without a tool", "mcp__github", "", gate.Block, gate.CodeInputInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := g.Decide(&gate.Call{Tool: tc.tool, Server: tc.server, Input: map[string]any{}})
			if d.Verdict != tc.verdict || d.Code != tc.code {
				t.Fatalf("tool %q server %q: got %+v, want %s %q", tc.tool, tc.server, d, tc.verdict, tc.code)
			}
		})
	}
	// Claude Code reports an MCP server by its configured name and folds it into tool names.
	if tool, err := toolname.Resolve("mcp__claude_ai_Gmail__search", "claude.ai Gmail"); err != nil || tool.Name != "mcp__claude_ai_Gmail__search" || tool.Server != "claude_ai_Gmail" {
		t.Fatalf("got %q %q %v", tool.Name, tool.Server, err)
	}
	// The server the rules see is the one the name carries.
	g = gateFor(t, gate.PolicyMeta{}, gate.Rule{Name: "srv", When: `server == "github"`, Action: gate.Block, Reason: "srv"})
	if d := g.Decide(&gate.Call{Tool: "mcp__github__x", Server: "GitHub", Input: map[string]any{}}); d.Verdict != gate.Block {
		t.Fatalf("got %+v", d)
	}
}

// TestToolGlobs pins what a tool pattern matches (see the package doc of internal/gate/toolname).
func TestToolGlobs(t *testing.T) {
	cases := []struct {
		pattern, tool string
		match         bool
	}{
		{"*", "a/b", true},
		{"*", "name.with.dots", true},
		{"*", "mcp__srv__dir/file", true},
		{"web*", "Web/Fetch", true},
		{"web.fetch", "Web.Fetch", true},
		{"web.fetch", "WebFetch", false},
		{"?ead", "Read", true},
		{"?ead", "/ead", true},
		{"[a-c]at", "bat", true},
		{"[a-c]at", "dat", false},
		{"[!a-c]at", "dat", true},
		{`\*`, "*", true},
		{`\*`, "x", false},
		{"mcp__github__*", "mcp__github__create_issue", true},
		{"mcp__github__*", "mcp__github__x__y", true},
		{"mcp__github__*", "mcp__github__a/b", true},
		{"mcp__github__*", "mcp__github_evil__x", false},
		{"mcp__github__*", "mcp__githubx__y", false},
		{"mcp__git*__*", "mcp__github_evil__x", true},
		{"mcp__git*__*", "mcp__gitlab__x", true},
		{"mcp__git*__*", "mcp__gxt__x", false},
		{"mcp__*__*", "mcp__a__b", true},
		{"mcp__*__*", "Bash", false},
		{"mcp__*__create_issue", "mcp__github__create_issue", true},
		{"mcp__*__create_issue", "mcp__a__b__create_issue", false},
		{"mcp__?__*", "mcp__a__b", true},
		{"mcp__?__*", "mcp__ab__c", false},
		{"mcp__github__?", "mcp__github__x", true},
		{"mcp__github__?", "mcp__github__xy", false},
		{"mcp__GitHub__Create_Issue", "MCP__github__create_issue", true},
		{"mcp__github__createissue", "mcp__github__create_issue", false},
		{"create_issue", "mcp__github__create_issue", false},
		{"{read,web_fetch}", "WebFetch", true},
		{"mcp__{github,gitlab}__*", "mcp__gitlab__x", true},
	}
	for _, tc := range cases {
		t.Run(tc.pattern+" vs "+tc.tool, func(t *testing.T) {
			g := gateFor(t, gate.PolicyMeta{}, gate.Rule{Name: "r", Tools: []string{tc.pattern}, Action: gate.Block, Reason: "matched"})
			d := g.Decide(&gate.Call{Tool: tc.tool, Input: map[string]any{}})
			if got := d.Verdict == gate.Block; got != tc.match {
				t.Fatalf("pattern %q vs tool %q: matched=%v, want %v (%+v)", tc.pattern, tc.tool, got, tc.match, d)
			}
			// The hook's one-tool compile agrees with the full index.
			p, _ := gate.CompileFor(build(t, gate.PolicyMeta{}, gate.Rule{Name: "r", Tools: []string{tc.pattern}, Action: gate.Block, Reason: "matched"}), tc.tool, "")
			if got := p.Decide(&gate.Call{Tool: tc.tool, Input: map[string]any{}}).Verdict == gate.Block; got != tc.match {
				t.Fatalf("CompileFor: pattern %q vs tool %q: matched=%v, want %v", tc.pattern, tc.tool, got, tc.match)
			}
		})
	}
	// An MCP pattern names a server and a tool: '*' never spans the separator between them,
	// so a pattern that stops inside the server part matches no tool and is refused.
	for _, p := range []string{"mcp__git*", "mcp__*", "mcp__github", "mcp__github__", "mcp____x", "[", `web\`, "[^a-c]at", `mcp__x__a[\-_]b`, "[a-z0-9]x", "{a,b"} {
		if errs := gate.ValidateRules([]gate.Rule{{Name: "r", Tools: []string{p}, Action: gate.Block}}); len(errs) == 0 {
			t.Errorf("pattern %q was accepted", p)
		}
	}
}

// redigest recomputes the digest of an edited snapshot file, as a writer of the file could.
func redigest(t *testing.T, data []byte) []byte {
	t.Helper()
	// How Encode writes the digest: the last member of a one-line object.
	const digestMember, fileEnd = `,"digest":"`, "}\n"
	i := bytes.LastIndex(data, []byte(digestMember))
	if i < 0 {
		t.Fatal("no digest member")
	}
	sum := sha256.Sum256(append(append([]byte{}, data[:i]...), fileEnd...))
	return append(append([]byte{}, data[:i]...), digestMember+"sha256:"+hex.EncodeToString(sum[:])+"\""+fileEnd...)
}

// TestStrictDecoding: the snapshot is read as the JavaScript that wrote it reads it back:
// field names are case-sensitive (claudecode's TestStrictHookInput reads the hook input so,
// and strictjson's TestDecode the decoder itself).
func TestStrictDecoding(t *testing.T) {
	s := build(t, gate.PolicyMeta{DefaultAction: gate.Block}, gate.Rule{Name: "r", Action: gate.Allow})
	data, _ := s.Encode()
	if _, err := gate.LoadSnapshot(redigest(t, data), ""); err != nil {
		t.Fatalf("a re-digested, unchanged snapshot must load: %v", err)
	}
	renamed := redigest(t, bytes.Replace(data, []byte(`"defaultAction"`), []byte(`"DefaultAction"`), 1))
	if _, err := gate.LoadSnapshot(renamed, ""); err == nil {
		t.Fatal("a snapshot field named in another case was accepted")
	}
}
