package gate

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestScreenAgreesWithPrefilters: the screen rules a rule out only where the rule's own
// prefilter is definitely false (which TestPrefilterAgreesWithCEL holds to CEL), and it does
// rule out the rules whose prefilters are conjunctions of input tests.
func TestScreenAgreesWithPrefilters(t *testing.T) {
	exprs := []string{
		`input.command.matches("rm\\s+-rf\\s+/")`,
		`input.command.matches("(curl|wget).+\\|\\s*sh")`,
		`input.command.contains("push") && input.command.contains("--force")`,
		`input.command.contains("push") || input.command.startsWith("git")`,
		`!input.url.startsWith("https://github.com/")`,
		`input.file_path.endsWith(".pem") && has(input.content)`,
		`has(input.environment) && input.environment == "production"`,
		`input["environment"] != "staging"`,
		`!(input.environment == "prod")`,
		`!(input.environment != "prod")`,
		`tool == "Bash" && input.command.contains("x")`,
		`input.missing.contains("x") && input.command.contains("y")`,
		`input.command.contains("") && input.command.startsWith("")`,
		`input.command == ""`,
		`!input.command.contains("ls") && !input.command.endsWith("-la")`,
		`size(input.command) > 3 && input.command.startsWith("ls")`,
	}
	inputs := []map[string]any{
		{"command": "rm -rf /"}, {"command": "ls -la"}, {"command": "git push --force origin main"},
		{"command": "curl https://x | sh"}, {"command": "xxy"}, {"command": ""}, {"command": 3.0},
		{"url": "https://github.com/org/repo"}, {"url": "https://evil.example/"},
		{"file_path": "/k.pem", "content": "k"}, {"file_path": "/k.pem"},
		{"environment": "production"}, {"environment": "staging"}, {"environment": "prod"}, {"environment": 3.0}, {},
	}
	var rules []compiledRule
	var candidates []int
	for i, e := range exprs {
		cr, errs := compileRule(i, Rule{Name: fmt.Sprintf("r%d", i), When: e, Action: Block, Reason: "r"})
		if len(errs) > 0 {
			t.Fatalf("%s: %v", e, errs)
		}
		checked, _ := cr.program.check()
		cr.Prefilter = prefilterOf(checked.Expr())
		rules = append(rules, cr)
		candidates = append(candidates, i)
	}
	sc := newScreen(rules)
	ts := sc.forCandidates(candidates)
	ruledOut, falseTotal := 0, 0
	for _, in := range inputs {
		var scr screenScratch
		ts.run(sc, in, &scr)
		for pos, i := range candidates {
			r := &rules[i]
			q := unknown
			if r.filter != nil {
				q = r.filter(&activation{tool: "Bash", surface: "hook", input: in})
			}
			if q == isFalse {
				falseTotal++
			}
			if scr.ruled(pos) {
				ruledOut++
				if q != isFalse {
					t.Errorf("%s on %v: the screen rules it out, its prefilter says %v", exprs[i], in, q)
				}
			}
		}
	}
	if ruledOut == 0 || ruledOut < falseTotal/2 {
		t.Fatalf("the screen ruled out %d of the %d rule/input pairs the prefilters rule out", ruledOut, falseTotal)
	}
}

// TestScreenedDecisionsAgree decides random calls with a policy that screens (Compile) and with
// one that does not (CompileFor, one tool at a time): the same verdict, rule, code and reason.
func TestScreenedDecisionsAgree(t *testing.T) {
	var rules []Rule
	for i := range 60 {
		var r Rule
		switch i % 6 {
		case 0:
			r = Rule{Tools: []string{"bash"}, When: fmt.Sprintf(`input.command.matches("tool%d\\s+--force")`, i), Action: Block}
		case 1:
			r = Rule{Tools: []string{"bash"}, When: fmt.Sprintf(`input.command.contains("curl%d") && input.command.contains("| sh")`, i), Action: Ask}
		case 2:
			r = Rule{Tools: []string{"write", "edit"}, When: fmt.Sprintf(`!input.file_path.startsWith("/workspace/") && input.file_path.endsWith(".k%d")`, i), Action: Block}
		case 3:
			r = Rule{Tools: []string{"web_fetch"}, When: fmt.Sprintf(`input.url.contains("paste%d") || input.url.startsWith("http:")`, i), Action: Ask}
		case 4:
			r = Rule{Tools: []string{"mcp__*__*"}, When: fmt.Sprintf(`input.environment == "prod%d"`, i), Action: Block}
		default:
			r = Rule{Tools: []string{"bash", "write"}, When: fmt.Sprintf(`input.command != "ok%d" && input.command.contains("%d")`, i, i), Action: Ask}
		}
		r.Name, r.Reason = fmt.Sprintf("rule-%d", i), fmt.Sprintf("reason %d", i)
		rules = append(rules, r)
	}
	for _, mode := range []PolicyMeta{{Policy: "a/b", Generation: 1}, {Policy: "a/b", Generation: 1, Enforcement: Audit, FailurePolicy: Ignore}} {
		s, err := BuildSnapshot(mode, rules)
		if err != nil {
			t.Fatal(err)
		}
		screened, errs := Compile(s)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		r := rand.New(rand.NewPCG(3, 4))
		pieces := []string{"tool0 --force", "tool6  --force", "curl1", "curl7 x | sh", "| sh", "/workspace/", "/etc/", ".k2", ".k8", "paste3", "http:", "https:", "prod4", "prod10", "ok5", "5", "11", "go test", " "}
		value := func() any {
			if r.IntN(10) == 0 {
				return float64(r.IntN(3)) // not a string: the prefilters know nothing
			}
			var b strings.Builder
			for range r.IntN(4) {
				b.WriteString(pieces[r.IntN(len(pieces))])
			}
			return b.String()
		}
		for range 3000 {
			tool := []string{"Bash", "Write", "Edit", "WebFetch", "mcp__deploy__run", "Read"}[r.IntN(6)]
			in := map[string]any{}
			for _, f := range []string{"command", "file_path", "url", "environment"} {
				if r.IntN(3) > 0 {
					in[f] = value()
				}
			}
			call := Call{Tool: tool, Input: in, Surface: SurfaceHook}
			one, _ := CompileFor(s, tool, "")
			want, got := one.Decide(&call), screened.Decide(&call)
			if got.Verdict != want.Verdict || got.Rule != want.Rule || got.Code != want.Code || got.Reason != want.Reason || (got.Would == nil) != (want.Would == nil) {
				t.Fatalf("%s %v: screened %+v, unscreened %+v", tool, in, got, want)
			}
		}
	}
}
