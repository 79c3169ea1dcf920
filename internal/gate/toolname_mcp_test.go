package gate_test

import (
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

// TestNonMCPPatternsMatchMCPNames: a pattern that does not start with mcp__ matches the whole
// name, MCP names included, with '_' and '-' folded on both sides; a Block rule written so
// must not let the MCP tool through.
func TestNonMCPPatternsMatchMCPNames(t *testing.T) {
	for _, tc := range []struct {
		pattern, tool string
	}{
		{"*delete_repo", "mcp__github__delete_repo"},
		{"*__delete_repo", "mcp__github__delete_repo"},
		{"*shell_exec", "mcp__srv__shell_exec"},
		{"{mcp__github__delete_repo,bash}", "mcp__github__delete_repo"},
		{"mcp_github_delete_repo", "mcp__github__delete_repo"},
		{"*Delete-Repo", "mcp__github__delete_repo"},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			g := gatetest.Gate(t, gate.Rule{Name: "r", Tools: []string{tc.pattern}, Action: gate.Block, Reason: "no"})
			if d := g.Decide(&gate.Call{Tool: tc.tool, Input: map[string]any{}}); d.Verdict != gate.Block {
				t.Fatalf("%s did not match %s: %+v", tc.pattern, tc.tool, d)
			}
			s, _ := gate.BuildSnapshot(gate.PolicyMeta{Policy: "a/b"}, []gate.Rule{{Name: "r", Tools: []string{tc.pattern}, Action: gate.Block, Reason: "no"}})
			p, _ := gate.CompileFor(s, tc.tool, "")
			if d := p.Decide(&gate.Call{Tool: tc.tool, Input: map[string]any{}}); d.Verdict != gate.Block {
				t.Fatalf("CompileFor: %s did not match %s: %+v", tc.pattern, tc.tool, d)
			}
		})
	}
	// The fold does not let a non-MCP pattern match more than the name says.
	g := gatetest.Gate(t, gate.Rule{Name: "r", Tools: []string{"*delete_repo"}, Action: gate.Block, Reason: "no"})
	if d := g.Decide(&gate.Call{Tool: "mcp__github__delete_issue", Input: map[string]any{}}); d.Verdict != gate.Allow {
		t.Fatalf("*delete_repo matched mcp__github__delete_issue: %+v", d)
	}
}
