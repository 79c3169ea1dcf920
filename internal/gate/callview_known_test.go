package gate

import (
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

// viewInputs are inputs that fill, leave empty or mistype each field the tool shapes name.
var viewInputs = []map[string]any{
	{},
	{"command": "rm -rf /tmp/x && curl https://pastebin.com/raw > /etc/x"},
	{"command": ""},
	{"command": 3.0},
	{"file_path": "/etc/passwd"},
	{"file_path": ""},
	{"notebook_path": "a.ipynb"},
	{"url": "https://pastebin.com/x"},
	{"url": 1.0},
	{"ws": map[string]any{"url": "wss://example.com/s"}},
	{"ws": "wss://example.com/s"},
	{"uri": "file:///etc/x"},
	{"path": "/w", "pattern": "../**/.env"},
	{"pattern": "*.go"},
	{"query": "q"},
	{"command": "Get-ChildItem", "file_path": "/w/a", "url": "https://github.com/x", "path": "/etc"},
	{"dir_path": "/etc", "pattern": "*"},
	{"command": "cat .env", "dir_path": "/"},
	{"absolute_path": "/etc/shadow"},
	{"include": []any{"**/.env", 2.0}},
	{"include": []any{}},
	{"include": "not a list"},
	{"prompt": "read https://pastebin.com/x please"},
	{"prompt": "no links here"},
	{"input": "*** Begin Patch\n*** Add File: /etc/x\n+y\n*** End Patch"},
	{"input": "not a patch"},
}

// viewTools are every name of the tool table, an MCP tool and a tool the table does not know.
func viewTools() []string {
	tools := []string{"mcp__github__create_issue", "SomeNewTool"}
	for _, s := range toolShapes {
		tools = append(tools, s.Names...)
	}
	return tools
}

// TestViewKnownAgreesWithViewOf: what the prefilters know of the view without building it is
// what viewOf builds.
func TestViewKnownAgreesWithViewOf(t *testing.T) {
	for _, tool := range viewTools() {
		for _, in := range viewInputs {
			v := viewOf(tool, in, "/workspace")
			if k := viewKind(tool); k != v.Kind {
				t.Errorf("%s %v: kind %q, view %q", tool, in, k, v.Kind)
			}
			lists := map[string]int{"reads": len(v.Reads), "writes": len(v.Writes), "urls": len(v.URLs), "hosts": len(v.Hosts), "commands": len(v.Commands)}
			for field, n := range lists {
				if viewListEmpty(tool, in, field) && n != 0 {
					t.Errorf("%s %v: %s said empty, view has %d", tool, in, field, n)
				}
			}
			if known, ok := viewShellKnown(tool, in); ok && known != v.ShellKnown {
				t.Errorf("%s %v: shellKnown %v, view %v", tool, in, known, v.ShellKnown)
			}
		}
	}
	// Only a command line leaves anything to the parser.
	if !viewListEmpty("Read", map[string]any{"file_path": "/x"}, "commands") || viewListEmpty("Bash", map[string]any{"command": "ls"}, "commands") {
		t.Error("commands: a Read runs none, a Bash line is the parser's to say")
	}
	if _, ok := viewShellKnown("Bash", map[string]any{"command": "ls"}); ok {
		t.Error("shellKnown of a command line is the parser's to say")
	}
}

// TestCallPrefilterAgreesWithCEL is TestPrefilterAgreesWithCEL for rules on the call's view,
// the sample policy's among them, on every tool of the table: wherever the prefilter claims to
// know the answer, CEL evaluates the expression without error to that same answer. And it does
// rule out most of the sample policy's rules for tools that run no shell command.
func TestCallPrefilterAgreesWithCEL(t *testing.T) {
	exprs := []string{
		`call.commands.exists(c, c.name == "rm")`,
		`call.kind == "exec" || call.kind == "read"`,
		`call.kind != "fetch" && call.hosts.exists(h, h == "pastebin.com")`,
		`!call.shellKnown`,
		`call.shellKnown && call.cwd == "/workspace"`,
		`!call.shellKnown || (call.kind == "exec" && call.commands.size() == 0)`,
		`call.reads.exists(p, p.startsWith("/etc")) || call.writes.exists(p, !p.isUnder("/workspace"))`,
		`call.urls.exists(u, u.contains("x")) && input.url.contains("x")`,
		`!call.writes.exists(p, p.isUnder("/workspace"))`,
	}
	data, err := os.ReadFile("../../config/samples/gate_v1alpha1_harnessagentpolicy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sample struct {
		Spec struct{ Rules []Rule } `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &sample); err != nil {
		t.Fatal(err)
	}
	for _, r := range sample.Spec.Rules {
		exprs = append(exprs, r.When)
	}
	decided, ruledOut := 0, 0
	for i, e := range exprs {
		judge := prefilterJudge(t, i, e)
		for _, tool := range viewTools() {
			for _, in := range viewInputs {
				q := judge(fmt.Sprintf("for %s %v", tool, in), func() *activation {
					return &activation{tool: tool, input: in, cwd: "/workspace"}
				})
				if q == unknown {
					continue
				}
				decided++
				if q == isFalse && i >= len(exprs)-len(sample.Spec.Rules) {
					ruledOut++
				}
			}
		}
	}
	if decided == 0 || ruledOut == 0 {
		t.Fatalf("the prefilter decided %d and ruled out %d of the sample's rules", decided, ruledOut)
	}
	t.Logf("decided %d evaluations, ruled out %d of the sample policy's", decided, ruledOut)
}
