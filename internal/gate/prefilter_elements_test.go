package gate

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"cel.dev/cel-go/common/types"

	"github.com/intutic/gate-operator/internal/strictjson"
)

// elementExprs are exists over the view's lists with bodies of every form the element prefilters
// know, mixed with parts they do not, and with iteration variables that shadow call and input.
var elementExprs = []string{
	`call.commands.exists(c, c.name == "rm")`,
	`call.commands.exists(c, c.name != "ls")`,
	`call.commands.exists(c, c.name in ["rm", "rmdir", "shred"] && !c.known)`,
	`call.commands.exists(c, c.name == "rm" && c.args.exists(a, a.startsWith("-") && a.contains("r")) && c.args.exists(a, !a.startsWith("-") && !path.resolve(c.cwd, a).isUnder("/workspace")))`,
	`call.commands.exists(c, c.exe.startsWith("/") || c.exe.endsWith(".sh"))`,
	`call.commands.exists(c, c.cwd.isUnder("/workspace/app") && c.name == "go")`,
	`call.commands.exists(c, !c.cwd.isUnder("/workspace"))`,
	`call.commands.exists(c, c.name.matches("^(curl|wget)$"))`,
	`call.commands.exists(c, !c.name.matches("rm"))`,
	`call.commands.exists(call, call.known && call.name == "ls")`,
	`call.commands.exists(input, input.name == "rm" || input.exe.contains("rm"))`,
	`call.commands.exists(c, c.name == "rm" || size(c.args) > 2)`,
	`call.commands.exists(c, has(c.name) && c.name == "cd")`,
	`call.writes.exists(p, !p.isUnder("/workspace"))`,
	`call.writes.exists(p, p.isUnder("/etc") || p.isUnder("~"))`,
	`call.writes.exists(p, p == "/etc/passwd")`,
	`call.reads.exists(p, p.endsWith(".env") && !p.contains("example"))`,
	`call.reads.exists(p, p.matches("(^|/)\\.ssh/"))`,
	`call.reads.exists(call, call.startsWith("/etc"))`,
	`call.hosts.exists(h, h != "pkg.go.dev" && !h.endsWith(".github.com"))`,
	`call.hosts.exists(h, h in ["pastebin.com", "0x0.st"])`,
	`call.hosts.exists(h, h == "" || h.size() > 10)`,
	`call.urls.exists(u, u.startsWith("http://"))`,
	`!call.writes.exists(p, p.isUnder("/workspace"))`,
	`call.writes.exists(p, !p.isUnder("/workspace")) || call.hosts.exists(h, h == "evil.example")`,
	`call.commands.exists(c, c.name == "git") && call.hosts.exists(h, h.endsWith("github.com"))`,
	`!call.shellKnown`,
	`!call.shellKnown || call.commands.exists(c, !c.known)`,
}

// elementCalls are calls whose views fill the lists the expressions range over.
var elementCalls = []struct {
	tool  string
	input map[string]any
}{
	{"Bash", map[string]any{"command": "go test ./... -run TestDecide -count=1"}},
	{"Bash", map[string]any{"command": "rm -rf /tmp/x && curl https://pastebin.com/raw > /etc/x"}},
	{"Bash", map[string]any{"command": "cd app && rm -r build; /bin/ls -la | tee ~/out"}},
	{"Bash", map[string]any{"command": "sudo $CMD x; eval \"$(cat f)\""}},
	{"Bash", map[string]any{"command": "./run.sh < ~/.ssh/id_rsa > /workspace/out 2>/dev/null"}},
	{"Bash", map[string]any{"command": "wget http://x.github.com/a https://pkg.go.dev/b"}},
	{"Bash", map[string]any{"command": "cat .env.example | git push"}},
	{"Bash", map[string]any{"command": "if then"}},
	{"Bash", map[string]any{"command": ""}},
	{"Write", map[string]any{"file_path": "/workspace/internal/gate/gate.go", "content": "x"}},
	{"Write", map[string]any{"file_path": "../etc/passwd"}},
	{"Write", map[string]any{"file_path": "/etc/passwd"}},
	{"Edit", map[string]any{"file_path": "~/x"}},
	{"Read", map[string]any{"file_path": "/workspace/.env"}},
	{"Grep", map[string]any{"path": "/w", "pattern": "../**/.env"}},
	{"WebFetch", map[string]any{"url": "https://pkg.go.dev/cel.dev/cel-go"}},
	{"WebFetch", map[string]any{"url": "https://api.github.com/x"}},
	{"WebFetch", map[string]any{"url": "http://evil.example:8080/"}},
	{"WebFetch", map[string]any{"url": "not a url"}},
	{"mcp__server2__deploy", map[string]any{"service": "api"}},
}

// TestElementPrefilterAgreesWithCEL: wherever an element prefilter rules a rule out, CEL
// evaluates its expression without error to false, on calls whose lists hold elements that
// satisfy the bodies and elements that do not; and it does rule out most of them.
func TestElementPrefilterAgreesWithCEL(t *testing.T) {
	ruledOut, total := 0, 0
	for i, e := range elementExprs {
		judge := prefilterJudge(t, i, e)
		for _, cwd := range []string{"/workspace", ""} {
			for _, c := range elementCalls {
				total++
				q := judge(fmt.Sprintf("for %s %v", c.tool, c.input), func() *activation {
					return &activation{tool: c.tool, input: c.input, cwd: cwd}
				})
				if q == isFalse {
					ruledOut++
				}
			}
		}
	}
	if ruledOut < total/2 {
		t.Fatalf("the element prefilters ruled out %d of %d evaluations", ruledOut, total)
	}
	t.Logf("ruled out %d of %d evaluations", ruledOut, total)
}

// TestViewRulesDecideWithoutCEL: rules on the call's view that no part of the call satisfies
// are ruled out without CEL, the command line parsed once for all of them; a rule it satisfies
// still goes to CEL.
func TestViewRulesDecideWithoutCEL(t *testing.T) {
	rules := []Rule{
		{Name: "rm", Tools: []string{"bash"}, Action: Block, Reason: "r",
			When: `call.commands.exists(c, c.name == "rm" && c.args.exists(a, !path.resolve(c.cwd, a).isUnder("/workspace")))`},
		{Name: "unknown", Tools: []string{"bash"}, When: `!call.shellKnown`, Action: Ask, Reason: "r"},
		{Name: "writes", When: `call.writes.exists(p, !p.isUnder("/workspace"))`, Action: Block, Reason: "r"},
		{Name: "hosts", When: `call.hosts.exists(h, h != "pkg.go.dev" && !h.endsWith(".github.com"))`, Action: Ask, Reason: "r"},
	}
	s, err := BuildSnapshot(PolicyMeta{Policy: "a/b", Generation: 1, DefaultAction: Allow}, rules)
	if err != nil {
		t.Fatal(err)
	}
	p, errs := Compile(s)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, c := range []struct {
		call    Call
		decided bool
	}{
		{Call{Tool: "Bash", Input: map[string]any{"command": "go test ./... -run TestDecide -count=1"}, Cwd: "/workspace"}, true},
		{Call{Tool: "Write", Input: map[string]any{"file_path": "internal/gate/gate.go"}, Cwd: "/workspace"}, true},
		{Call{Tool: "WebFetch", Input: map[string]any{"url": "https://api.github.com/x"}}, true},
		{Call{Tool: "mcp__deploy__run", Input: map[string]any{}}, true},
		{Call{Tool: "Bash", Input: map[string]any{"command": "rm -rf /etc"}, Cwd: "/workspace"}, false},
		{Call{Tool: "Bash", Input: map[string]any{"command": "$X"}}, false},
		{Call{Tool: "Write", Input: map[string]any{"file_path": "../x"}, Cwd: "/workspace"}, false},
		{Call{Tool: "WebFetch", Input: map[string]any{"url": "https://evil.example/"}}, false},
	} {
		d, decided := p.DecideWithoutCEL(&c.call)
		if decided != c.decided || (decided && d.Verdict != Allow) {
			t.Errorf("%s %v: decided %v (%+v), want %v", c.call.Tool, c.call.Input, decided, d, c.decided)
		}
	}
}

// TestElementPrefilterCompat: an exists whose body a hook does not know (an op from a newer
// controller) is read as an exists without one, false only when its list is empty; one this
// hook knows survives the snapshot's fast decoder; and a body too large to carry is dropped
// before the rest of the prefilter is.
func TestElementPrefilterCompat(t *testing.T) {
	future := Prefilter{Op: "exists", Var: varCall, Field: "writes", Args: []Prefilter{{Op: "isRoughly", Var: varElement, Value: "/x"}}}
	q := future.compile()
	if q == nil {
		t.Fatal("an exists with a body this hook does not know does not compile")
	}
	if got := q(&activation{tool: "Read", input: map[string]any{"file_path": "/x"}}); got != isFalse {
		t.Errorf("a Read's writes are empty: got %v", got)
	}
	if got := q(&activation{tool: "Write", input: map[string]any{"file_path": "/x"}}); got != unknown {
		t.Errorf("a Write's writes are not: got %v", got)
	}

	s, err := BuildSnapshot(PolicyMeta{Policy: "a/b", Generation: 1}, []Rule{
		{Name: "rm", When: elementExprs[2], Action: Block, Reason: "r"},
		{Name: "hosts", When: elementExprs[19], Action: Ask},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Rules[0].Prefilter == nil || len(s.Rules[0].Prefilter.Args) != 1 {
		t.Fatalf("no element prefilter in %+v", s.Rules[0].Prefilter)
	}
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	fast, ok := decodeCanonical(data)
	if !ok {
		t.Fatalf("not decoded as canonical:\n%s", data)
	}
	var strict Snapshot
	if err := strictjson.Decode(data, &strict); err != nil || !reflect.DeepEqual(*fast, strict) {
		t.Fatalf("the fast decoder reads\n%+v\nstrictjson.Decode\n%+v (%v)", *fast, strict, err)
	}

	long := `call.hosts.exists(h, h == "a"`
	for c := 'b'; c <= 'z'; c++ {
		long += fmt.Sprintf(` || h == %q`, c)
	}
	long += ")"
	cr, errs := compileRule(0, Rule{Name: "r", When: long, Action: Block})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	checked, _ := cr.program.check()
	pf := boundedPrefilter(prefilterOf(checked.Expr()), long)
	if b, _ := json.Marshal(pf); string(b) != `{"op":"exists","var":"call","field":"hosts"}` {
		t.Errorf("a body too large to carry: prefilter %s", b)
	}
}

// FuzzElementPrefilter: for rules whose element prefilters test a fuzzed literal, over the views
// of a fuzzed command line, path and URL, a prefilter that rules a rule out agrees with CEL.
func FuzzElementPrefilter(f *testing.F) {
	f.Add("rm", "rm -rf /tmp/x && curl https://a.example/x > /etc/y", "/workspace/a", "https://pkg.go.dev/x", "/workspace")
	f.Add("/workspace", "cd /workspace/app && go test ./...", "../etc/passwd", "http://x.github.com:80/", "")
	f.Add("", "sudo -u root sh -c 'rm -r ~/x' | tee -a /workspace/../out", "~/x", "https://[::1]/", "/")
	f.Add(".github.com", "eval \"$X\"; wget ftp://h\\x/y", "a/./b//c", "HTTPS://Ex.COM./", "/w/")
	templates := []string{
		`call.commands.exists(c, c.name == %[1]s)`,
		`call.commands.exists(c, c.name != %[1]s && c.known)`,
		`call.commands.exists(c, c.exe.contains(%[1]s) || c.cwd.startsWith(%[1]s))`,
		`call.commands.exists(c, !c.cwd.isUnder(%[1]s) && c.name in [%[1]s, "rm"])`,
		`call.commands.exists(c, c.name.endsWith(%[1]s) && c.args.exists(a, a == %[1]s))`,
		`call.writes.exists(p, !p.isUnder(%[1]s))`,
		`call.writes.exists(p, p.isUnder(%[1]s) && p != %[1]s)`,
		`call.reads.exists(p, p.startsWith(%[1]s) || p.endsWith(%[1]s))`,
		`call.urls.exists(u, u.contains(%[1]s))`,
		`call.hosts.exists(h, h != %[1]s && !h.endsWith(%[1]s))`,
		`call.hosts.exists(h, !(h in [%[1]s, "pkg.go.dev"]))`,
		`!call.shellKnown && call.commands.exists(c, c.name == %[1]s)`,
	}
	f.Fuzz(func(t *testing.T, lit, command, path, url, cwd string) {
		calls := []struct {
			tool  string
			input map[string]any
		}{
			{"Bash", map[string]any{"command": command}},
			{"Write", map[string]any{"file_path": path}},
			{"Read", map[string]any{"file_path": path}},
			{"WebFetch", map[string]any{"url": url}},
		}
		for i, tmpl := range templates {
			e := fmt.Sprintf(tmpl, strconv.Quote(lit))
			cr, errs := compileRule(i, Rule{Name: "r", When: e, Action: Block, Reason: "r"})
			if len(errs) > 0 {
				continue // a literal CEL does not read as Go quotes it
			}
			prg, err := cr.program.get()
			if err != nil || cr.filter == nil {
				continue
			}
			for _, c := range calls {
				if cr.filter(&activation{tool: c.tool, input: c.input, cwd: cwd}) != isFalse {
					continue
				}
				out, _, err := prg.Eval(&activation{tool: c.tool, input: c.input, cwd: cwd})
				if err != nil || out != types.False {
					t.Fatalf("%s for %s %q (cwd %q): ruled out, CEL says %v (%v)", e, c.tool, c.input, cwd, out, err)
				}
			}
		}
	})
}
