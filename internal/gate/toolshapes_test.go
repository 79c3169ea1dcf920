package gate

import (
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/gate/toolname"
)

// TestToolShapes reads the table: for every row and every spelling of its names (as each
// runtime spells them, and folded as tool patterns fold them), an input with every field the row
// names gives a view with that field in the right list.
func TestToolShapes(t *testing.T) {
	const cwd = "/workspace"
	row := map[string]int{}
	for i, shape := range toolShapes {
		if shape.Kind == "" || len(shape.Runtimes) == 0 || len(shape.Names) == 0 {
			t.Errorf("row %v has no kind, runtimes or names", shape.Names)
		}
		in := map[string]any{}
		for _, f := range append(append([]string{}, shape.Reads...), shape.Writes...) {
			in[firstAlt(f)] = "sub/" + firstAlt(f)
		}
		for _, f := range shape.ReadLists {
			in[f] = []any{"docs/" + f + "/*.md", 3.0, ""}
		}
		if shape.Dir != "" {
			in[firstAlt(shape.Dir)] = "src"
		}
		if shape.Pattern != "" {
			in[shape.Pattern] = "pkg/**/*.go"
		}
		for _, f := range shape.URLs {
			setField(in, f, "https://"+strings.ReplaceAll(f, ".", "-")+".example/x")
		}
		for _, f := range shape.TextURLs {
			in[f] = "summarise https://text-" + f + ".example/x for me"
		}
		if shape.Shell != "" {
			in[shape.Shell] = "rm -rf build > out.log"
		}
		if shape.ShellDir != "" {
			in[shape.ShellDir] = "sub"
		}
		if shape.Patch != "" {
			in[shape.Patch] = "*** Begin Patch\n*** Update File: a.go\n@@\n-x\n+y\n*** End Patch\n"
		}
		if shape.Code != "" {
			in[shape.Code] = "Remove-Item -Recurse C:\\"
		}
		for _, name := range shape.Names {
			if j, dup := row[toolname.Normalize(name)]; dup && j != i {
				t.Errorf("%s is in rows %d and %d", name, j, i)
			}
			row[toolname.Normalize(name)] = i
			for _, spelling := range []string{name, strings.ToLower(name), strings.ToUpper(name), snake(name)} {
				v := viewOf(spelling, in, cwd)
				checkShapeView(t, spelling, shape, v)
			}
		}
	}
}

func checkShapeView(t *testing.T, name string, shape ToolShape, v CallView) {
	t.Helper()
	if v.Kind != shape.Kind {
		t.Errorf("%s: kind %q, want %q", name, v.Kind, shape.Kind)
	}
	var reads, writes, urls []string
	for _, f := range shape.Reads {
		reads = append(reads, "/workspace/sub/"+firstAlt(f))
	}
	for _, f := range shape.Writes {
		writes = append(writes, "/workspace/sub/"+firstAlt(f))
	}
	for _, f := range shape.ReadLists {
		reads = append(reads, "/workspace/docs/"+f+"/*.md")
	}
	switch {
	case shape.Pattern != "":
		reads = append(reads, "/workspace/src/pkg")
	case shape.Dir != "":
		reads = append(reads, "/workspace/src")
	}
	for _, f := range shape.URLs {
		urls = append(urls, "https://"+strings.ReplaceAll(f, ".", "-")+".example/x")
	}
	for _, f := range shape.TextURLs {
		urls = append(urls, "https://text-"+f+".example/x")
	}
	if shape.Patch != "" {
		reads = append(reads, "/workspace/a.go")
		writes = append(writes, "/workspace/a.go")
	}
	if shape.Shell != "" {
		out := "/workspace/out.log"
		if shape.ShellDir != "" {
			out = "/workspace/sub/out.log"
		}
		writes = append(writes, out)
		if len(v.Commands) != 1 || v.Commands[0].Name != "rm" || !v.ShellKnown {
			t.Errorf("%s: commands %+v (known %v), want rm", name, v.Commands, v.ShellKnown)
		}
	}
	if shape.Code != "" && v.ShellKnown {
		t.Errorf("%s: code the gate does not parse, yet ShellKnown", name)
	}
	if shape.Shell == "" && len(v.Commands) != 0 {
		t.Errorf("%s: commands %+v from a tool that runs no shell", name, v.Commands)
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"reads", v.Reads, reads}, {"writes", v.Writes, writes}, {"urls", v.URLs, urls}} {
		if strings.Join(c.got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: %s %q, want %q", name, c.what, c.got, c.want)
		}
	}
	if len(v.Hosts) != len(v.URLs) {
		t.Errorf("%s: %d hosts for %d URLs", name, len(v.Hosts), len(v.URLs))
	}
}

// firstAlt is the first of a field's spellings ("a|b" is a, or b when the input has no a).
func firstAlt(field string) string {
	first, _, _ := strings.Cut(field, "|")
	return first
}

// TestFieldAlternatives: a field spelled two ways is read from whichever the input has, the
// first when it has both.
func TestFieldAlternatives(t *testing.T) {
	for _, c := range []struct {
		tool  string
		input map[string]any
		reads []string
	}{
		{"glob", map[string]any{"pattern": "*.go", "path": "a"}, []string{"/w/a"}},
		{"glob", map[string]any{"pattern": "*.go", "dir_path": "b"}, []string{"/w/b"}},
		{"glob", map[string]any{"pattern": "*.go", "path": "a", "dir_path": "b"}, []string{"/w/a"}},
		{"glob", map[string]any{"pattern": "*.go", "path": 3.0, "dir_path": "b"}, []string{"/w/b"}},
		{"read_file", map[string]any{"absolute_path": "/etc/passwd"}, []string{"/etc/passwd"}},
		{"read_file", map[string]any{"file_path": ".env", "absolute_path": "/etc/passwd"}, []string{"/w/.env"}},
		{"list_directory", map[string]any{}, []string{"/w"}},
	} {
		if got := viewOf(c.tool, c.input, "/w").Reads; strings.Join(got, ",") != strings.Join(c.reads, ",") {
			t.Errorf("%s %v: reads %q, want %q", c.tool, c.input, got, c.reads)
		}
	}
}

// TestGeminiShellDir: Gemini CLI's run_shell_command runs in its dir_path, so the command's
// relative paths are resolved there.
func TestGeminiShellDir(t *testing.T) {
	v := viewOf("run_shell_command", map[string]any{"command": "rm -rf etc", "dir_path": "/"}, "/workspace")
	if len(v.Commands) != 1 || v.Commands[0].Cwd != "/" || strings.Join(v.Commands[0].Args, " ") != "-rf etc" {
		t.Fatalf("commands %+v", v.Commands)
	}
	v = viewOf("run_shell_command", map[string]any{"command": "echo x > out", "dir_path": "../etc"}, "/workspace")
	if strings.Join(v.Writes, ",") != "/etc/out" {
		t.Fatalf("writes %q, want /etc/out", v.Writes)
	}
}

// TestTextURLs: web_fetch's prompt names its URLs among its words, as Gemini CLI reads them.
func TestTextURLs(t *testing.T) {
	v := viewOf("web_fetch", map[string]any{"prompt": "Summarise https://pastebin.com/raw/x and\nhttp://github.com/a/b, not pastebin.com"}, "")
	if strings.Join(v.Hosts, ",") != "pastebin.com,github.com" {
		t.Fatalf("hosts %q (urls %q)", v.Hosts, v.URLs)
	}
}

func setField(in map[string]any, field, value string) {
	parts := strings.Split(field, ".")
	for _, p := range parts[:len(parts)-1] {
		next := map[string]any{}
		in[p] = next
		in = next
	}
	in[parts[len(parts)-1]] = value
}

// snake spells a CamelCase name in snake_case, as Managed Agents spells web_fetch.
func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if r >= 'A' && r <= 'Z' && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}

// TestRuntimeSpellings pins the names each runtime sends to their rows.
func TestRuntimeSpellings(t *testing.T) {
	for name, kind := range map[string]string{
		// Claude Code (PreToolUse tool_name)
		"Bash": KindExec, "Read": KindRead, "Write": KindWrite, "Edit": KindWrite, "MultiEdit": KindWrite,
		"NotebookEdit": KindWrite, "Glob": KindRead, "Grep": KindRead, "WebFetch": KindFetch,
		"WebSearch": KindFetch, "Monitor": KindExec, "PowerShell": KindExec, "TodoWrite": KindOther,
		"Agent": KindOther, "Task": KindOther, "ListMcpResourcesTool": KindMCP, "ReadMcpResourceTool": KindMCP,
		// harness common names and claude-code adapter keys
		"read": KindRead, "write": KindWrite, "edit": KindWrite, "bash": KindExec, "grep": KindRead,
		"glob": KindRead, "webSearch": KindFetch, "askUserQuestions": KindOther, "ListMcpResources": KindMCP,
		"ReadMcpResource": KindMCP,
		// Managed Agents agent_toolset_20260401
		"web_fetch": KindFetch, "web_search": KindFetch,
		// MCP tools and tools nobody listed
		"mcp__github__create_issue": KindMCP, "mcp__harness-tools__deploy": KindMCP, "LSP": KindUnknown,
		"custom_deploy": KindUnknown, "": KindUnknown,
	} {
		if got := viewOf(name, map[string]any{}, "").Kind; got != kind {
			t.Errorf("%q: kind %q, want %q", name, got, kind)
		}
	}
}

// TestUnknownToolView: a tool the table does not know gets empty lists, ShellKnown true and no
// error, whatever its input holds; so does a known tool whose fields are missing or not strings.
func TestUnknownToolView(t *testing.T) {
	for _, c := range []struct {
		tool  string
		input map[string]any
	}{
		{"custom_deploy", map[string]any{"command": "rm -rf /", "file_path": "/etc/passwd", "url": "https://x"}},
		{"mcp__fs__write_file", map[string]any{"path": "/etc/passwd"}},
		{"Read", map[string]any{"file_path": 3.0}},
		{"Write", map[string]any{"file_path": ""}},
		{"Bash", map[string]any{"command": []any{"rm"}}},
		{"Bash", map[string]any{"restart": true}},
		{"Monitor", map[string]any{"ws": "not an object"}},
		{"WebFetch", nil},
	} {
		v := viewOf(c.tool, c.input, "/workspace")
		if len(v.Reads)+len(v.Writes)+len(v.URLs)+len(v.Hosts)+len(v.Commands) != 0 || !v.ShellKnown {
			t.Errorf("%s %v: view %+v, want empty lists and ShellKnown", c.tool, c.input, v)
		}
		if v.Reads == nil || v.Writes == nil || v.URLs == nil || v.Hosts == nil || v.Commands == nil {
			t.Errorf("%s: nil list in %+v", c.tool, v)
		}
	}
	if v := ViewOf(&Call{Tool: "mcp__", Input: map[string]any{}}); v.Kind != KindUnknown {
		t.Errorf("a tool name that does not resolve: kind %q", v.Kind)
	}
}

func TestSearchRoot(t *testing.T) {
	glob := shapeOf("Glob")
	for _, c := range []struct {
		cwd  string
		in   map[string]any
		want string
	}{
		{"/w", map[string]any{"pattern": "**/*.go"}, "/w"},
		{"/w", map[string]any{"pattern": "src/**/*.go", "path": "a"}, "/w/a/src"},
		{"/w", map[string]any{"pattern": "/etc/*.conf"}, "/etc"},
		{"/w", map[string]any{"pattern": "/*"}, "/"},
		{"/w", map[string]any{"pattern": "x.go"}, "/w"},
		{"/w", map[string]any{"pattern": "../../*"}, "/"},
		{"/w/a", map[string]any{"pattern": "{x,../..}/*"}, "/"},
		{"/w/a", map[string]any{"pattern": "b/{x,..}/*"}, "/w/a"},
		{"", map[string]any{"pattern": "*.go"}, "."},
		{"", map[string]any{"pattern": "**/../*", "path": "/w"}, "/"},
	} {
		if got := searchRoot(c.in, glob, c.cwd); got != c.want {
			t.Errorf("searchRoot(%v, cwd %q) = %q, want %q", c.in, c.cwd, got, c.want)
		}
	}
}

func TestHostOf(t *testing.T) {
	for raw, want := range map[string]string{
		"https://Example.COM:8443/x":                 "example.com",
		"https://example.com./":                      "example.com",
		"http://[::1]:80/":                           "::1",
		"https://user:pw@good.example@evil.example/": "evil.example",
		"https://good.example\\@evil.example/":       "good.example",
		" https://a.example/ ":                       "a.example",
		"https://a.exa\tmple/":                       "a.example",
		"file:///etc/passwd":                         "",
		"example.com/path":                           "",
		"https://%zz/":                               "",
		"postgres://db.internal:5432/x":              "db.internal",
	} {
		if got := hostOf(raw); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", raw, got, want)
		}
	}
}
