package gate

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// readmeCallRules are the example rules of the section on the call's view in
// docs/policy-language.md.
func readmeCallRules(t *testing.T) []Rule {
	t.Helper()
	b, err := os.ReadFile("../../docs/policy-language.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### The call's view")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/policy-language.md has no yaml block in its section on the call's view")
	}
	var doc struct {
		Rules []Rule `json:"rules"`
	}
	if err := yaml.UnmarshalStrict([]byte(block), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Rules
}

func TestDecideWithCallView(t *testing.T) {
	s, err := BuildSnapshot(PolicyMeta{Policy: "a/p", Generation: 1, DefaultAction: Allow, FailurePolicy: Fail}, readmeCallRules(t))
	if err != nil {
		t.Fatal(err)
	}
	p, errs := Compile(s)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	bash := func(cmd, cwd string) Call {
		return Call{Tool: "Bash", Input: map[string]any{"command": cmd}, Cwd: cwd, Surface: SurfaceHook}
	}
	for _, c := range []struct {
		call Call
		want Verdict
		rule string
	}{
		{bash("rm -rf build && go test ./...", "/workspace/app"), Allow, ""},
		{bash("rm -rf ../../etc", "/workspace/app"), Block, "no-recursive-rm-outside-workspace"},
		{bash("cd / && rm -fr etc", "/workspace"), Block, "no-recursive-rm-outside-workspace"},
		{Call{Tool: "bash", Input: map[string]any{"command": "rm -rf /etc"}, Surface: SurfaceManagedAgents}, Block, "no-recursive-rm-outside-workspace"},
		{bash(`rm -rf "$DIR"`, "/workspace"), Ask, "rm-with-dynamic-arguments"},
		{bash(`find / -exec rm -rf {} +`, "/workspace"), Ask, "rm-with-dynamic-arguments"},
		{bash("$CMD", "/workspace"), Ask, "shell-not-static"},
		{bash("echo x > /etc/motd", "/workspace"), Block, "writes-stay-in-workspace"},
		{Call{Tool: "Write", Input: map[string]any{"file_path": "../etc/passwd", "content": "x"}, Cwd: "/workspace"}, Block, "writes-stay-in-workspace"},
		{Call{Tool: "write", Input: map[string]any{"file_path": "src/a.go", "content": "x"}, Surface: SurfaceHarness}, Block, "writes-stay-in-workspace"},
		{Call{Tool: "NotebookEdit", Input: map[string]any{"notebook_path": "/workspace/../n.ipynb", "new_source": ""}}, Block, "writes-stay-in-workspace"},
		{Call{Tool: "Edit", Input: map[string]any{"file_path": "/workspace/a.go"}}, Allow, ""},
		{Call{Tool: "web_fetch", Input: map[string]any{"url": "https://evil.example/"}, Surface: SurfaceManagedAgents}, Ask, "fetch-only-github"},
		{Call{Tool: "WebFetch", Input: map[string]any{"url": "https://raw.github.com/x"}}, Allow, ""},
		{Call{Tool: "WebFetch", Input: map[string]any{"url": "http://169.254.169.254/latest/meta-data"}}, Block, "no-metadata-endpoint"},
		{bash("curl -s http://169.254.169.254/", "/workspace"), Block, "no-metadata-endpoint"},
		{Call{Tool: "deploy", Input: map[string]any{"env": "prod"}, Surface: SurfaceWorkflow}, Ask, "unknown-tools-ask"},
		{Call{Tool: "mcp__github__create_issue", Input: map[string]any{"title": "x"}}, Allow, ""},
		{Call{Tool: "TodoWrite", Input: map[string]any{"todos": []any{}}}, Allow, ""},
	} {
		d := p.Decide(&c.call)
		if d.Verdict != c.want || d.Rule != c.rule {
			t.Errorf("%s %v (cwd %q): %s by %q (%s), want %s by %q", c.call.Tool, c.call.Input, c.call.Cwd, d.Verdict, d.Rule, d.Reason, c.want, c.rule)
		}
	}
}

// TestCallViewIsLazy: the view is built on the first rule that reads call, once per decision,
// and never for rules that do not.
func TestCallViewIsLazy(t *testing.T) {
	compiled := func(when string) *compiledRule {
		cr, errs := compileRule(0, Rule{Name: "r", When: when, Action: Block, Reason: "r"})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return &cr
	}
	a := &activation{tool: "Bash", input: map[string]any{"command": "ls"}, cwd: "/w"}
	if _, err := compiled(`input.command == "ls" && tool == "Bash"`).eval(a); err != nil || a.callVal != nil {
		t.Fatalf("a rule that does not read call built the view (err %v)", err)
	}
	if _, err := compiled(`call.kind == "exec"`).eval(a); err != nil || a.callVal == nil {
		t.Fatalf("the view was not built (err %v)", err)
	}
	built := a.callVal
	if _, err := compiled(`call.commands.size() == 1`).eval(a); err != nil || a.callVal != built {
		t.Fatalf("the view was built twice (err %v)", err)
	}
	// Prefilters read of the view what is known without building it (callview_known.go), and an
	// exists' body as an element prefilter (prefilter_elements.go), the iteration variable
	// shadowing call.
	for e, want := range map[string]string{
		`call.kind == "exec"`:                       `{"op":"eq","var":"call","field":"kind","value":"exec"}`,
		`call.commands.exists(c, c.name == "rm")`:   `{"op":"exists","args":[{"op":"eq","var":"element","field":"name","value":"rm"}],"var":"call","field":"commands"}`,
		`"x".isUnder(call.cwd)`:                     "null",
		`call.commands.all(c, c.name == "rm")`:      "null",
		`call.commands.exists_one(c, c.known)`:      "null",
		`call.commands.size() == 0`:                 "null",
		`call.commands.exists(call, call.known)`:    `{"op":"exists","args":[{"op":"true","var":"element","field":"known"}],"var":"call","field":"commands"}`,
		`call.commands.exists(c, c.cwd == "/x")`:    `{"op":"exists","args":[{"op":"eq","var":"element","field":"cwd","value":"/x"}],"var":"call","field":"commands"}`,
		`call.commands.exists(c, size(c.args) > 1)`: `{"op":"exists","var":"call","field":"commands"}`,
		`call.writes.exists(p, p.size() > 1)`:       `{"op":"exists","var":"call","field":"writes"}`,
	} {
		checked, err := compiled(e).program.check()
		if err != nil {
			t.Fatal(err)
		}
		if pf, _ := json.Marshal(prefilterOf(checked.Expr())); string(pf) != want {
			t.Errorf("%s has the prefilter %s, want %s", e, pf, want)
		}
	}
}
