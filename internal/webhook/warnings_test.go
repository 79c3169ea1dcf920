package webhook

import (
	"strings"
	"testing"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// TestUnreachableRules: a rule is named only when an earlier enforced Block without `when`
// matches every call to its tools, by the gate's own matching of names (case and '_' folded,
// MCP globs) or by an identical glob.
func TestUnreachableRules(t *testing.T) {
	block := func(name string, tools ...string) gatev1.Rule {
		return gatev1.Rule{Name: name, Tools: tools, Action: gatev1.ActionBlock, Reason: name}
	}
	allow := func(name string, tools ...string) gatev1.Rule {
		return gatev1.Rule{Name: name, Tools: tools, Action: gatev1.ActionAllow}
	}
	for _, tc := range []struct {
		name  string
		rules []gatev1.Rule
		audit bool
		want  []string // the names of the rules that never decide
	}{
		{"every tool", []gatev1.Rule{block("all"), allow("x", "Read")}, false, []string{"x"}},
		{"star", []gatev1.Rule{block("all", "*"), allow("x")}, false, []string{"x"}},
		{"folded names", []gatev1.Rule{block("b", "web_fetch", "Bash"), allow("x", "WebFetch", "bash")}, false, []string{"x"}},
		{"mcp glob covers a name", []gatev1.Rule{block("b", "mcp__github__*"), allow("x", "mcp__github__delete_repo")}, false, []string{"x"}},
		{"same glob", []gatev1.Rule{block("b", "mcp__github__*"), allow("x", "MCP__github__*")}, false, []string{"x"}},
		{"a tool not covered", []gatev1.Rule{block("b", "Bash"), allow("x", "Bash", "Read")}, false, nil},
		{"every tool is not covered by some", []gatev1.Rule{block("b", "Bash"), allow("x")}, false, nil},
		{"a when", []gatev1.Rule{{Name: "b", When: "true", Action: gatev1.ActionBlock, Reason: "b"}, allow("x", "Read")}, false, nil},
		{"a wider glob is not decided", []gatev1.Rule{block("b", "mcp__*__*"), allow("x", "mcp__github__*")}, false, nil},
		{"an earlier rule is never named", []gatev1.Rule{allow("x", "Read"), block("b", "Read")}, false, nil},
		{"an audited blocker", []gatev1.Rule{{Name: "b", Action: gatev1.ActionBlock, Reason: "b", Enforcement: gatev1.EnforcementAudit}, allow("x")}, false, nil},
		{"an audit policy", []gatev1.Rule{block("b"), allow("x")}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policyWith("agents", "p", tc.rules...)
			if tc.audit {
				p.Spec.Enforcement = gatev1.EnforcementAudit
			}
			got := unreachableRules(p)
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want rules %v", got, tc.want)
			}
			for i, name := range tc.want {
				if !strings.Contains(got[i], "("+name+") never decides") {
					t.Errorf("warning %q does not name %s", got[i], name)
				}
			}
		})
	}
}
