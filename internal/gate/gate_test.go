// Over 300 lines: the table tests of the gate's one public contract (names, semantics, fail closed, concurrency).

package gate_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
)

func build(t *testing.T, meta gate.PolicyMeta, rules ...gate.Rule) *gate.Snapshot {
	t.Helper()
	if meta.Policy == "" {
		meta.Policy = "agents/test"
	}
	s, err := gate.BuildSnapshot(meta, rules)
	if err != nil {
		t.Fatalf("BuildSnapshot: %v", err)
	}
	return s
}

func gateFor(t *testing.T, meta gate.PolicyMeta, rules ...gate.Rule) *gate.Gate {
	t.Helper()
	s := build(t, meta, rules...)
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(meta.WorkspaceID)
	if err := g.Load(data); err != nil {
		t.Fatalf("Load: %v", err)
	}
	return g
}

func bash(cmd string) *gate.Call {
	return &gate.Call{Tool: "Bash", Input: map[string]any{"command": cmd}, Surface: gate.SurfaceHook}
}

func TestToolNameMatching(t *testing.T) {
	cases := []struct {
		name    string
		pattern string
		tool    string
		server  string
		match   bool
	}{
		{"exact, other case", "bash", "Bash", "", true},
		{"underscore ignored", "web_fetch", "WebFetch", "", true},
		{"camel case", "web_fetch", "webFetch", "", true},
		{"dash ignored", "web-fetch", "web_fetch", "", true},
		{"different tool", "web_fetch", "WebSearch", "", false},
		{"glob star", "Web*", "WebSearch", "", true},
		{"glob question", "Gre?", "Grep", "", true},
		{"glob class", "[rw]rite", "Write", "", true},
		{"star matches every tool", "*", "NotebookEdit", "", true},
		{"mcp exact", "mcp__github__create_issue", "mcp__github__create_issue", "", true},
		{"mcp keeps underscores", "mcp__github__createissue", "mcp__github__create_issue", "", false},
		{"mcp case-insensitive", "mcp__GitHub__*", "mcp__github__create_issue", "", true},
		{"mcp server glob", "mcp__github__*", "mcp__github__create_issue", "", true},
		{"mcp other server", "mcp__github__*", "mcp__gitlab__create_issue", "", false},
		{"mcp joined from server", "mcp__github__create_issue", "create_issue", "github", true},
		{"mcp server joined, glob", "mcp__*__create_issue", "create_issue", "github", true},
		{"bare name does not match mcp tool", "create_issue", "create_issue", "github", false},
		{"legacy MultiEdit", "multi_edit", "MultiEdit", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := gateFor(t, gate.PolicyMeta{}, gate.Rule{Name: "r", Tools: []string{tc.pattern}, Action: gate.Block, Reason: "matched"})
			d := g.Decide(&gate.Call{Tool: tc.tool, Server: tc.server, Input: map[string]any{}})
			if got := d.Verdict == gate.Block; got != tc.match {
				t.Fatalf("pattern %q vs tool %q (server %q): matched=%v, want %v (%+v)", tc.pattern, tc.tool, tc.server, got, tc.match, d)
			}
		})
	}
}

func TestDecisionSemantics(t *testing.T) {
	allowGit := gate.Rule{Name: "allow-git", Tools: []string{"bash"}, When: `input.command.startsWith("git ")`, Action: gate.Allow, Reason: "git is fine"}
	askPush := gate.Rule{Name: "ask-push", Tools: []string{"bash"}, When: `input.command.contains("push")`, Action: gate.Ask, Reason: "pushing needs a human"}
	askForce := gate.Rule{Name: "ask-force", Tools: []string{"bash"}, When: `input.command.contains("--force")`, Action: gate.Ask, Reason: "force needs a human"}
	blockForce := gate.Rule{Name: "block-force-push", Tools: []string{"bash"}, When: `input.command.matches("push\\s+--force")`, Action: gate.Block, Reason: "no force pushes", Code: "force_push"}
	blockMain := gate.Rule{Name: "block-main", Tools: []string{"bash"}, When: `input.command.endsWith("main")`, Action: gate.Block, Reason: "not on main", Code: "main_branch"}
	erroring := gate.Rule{Name: "needs-field", Tools: []string{"bash"}, When: `input.missing == "x"`, Action: gate.Allow, Reason: "never"}

	cases := []struct {
		name       string
		meta       gate.PolicyMeta
		rules      []gate.Rule
		call       *gate.Call
		verdict    gate.Verdict
		rule, code string
		reason     string
	}{
		{"allow rule", gate.PolicyMeta{DefaultAction: gate.Block}, []gate.Rule{allowGit}, bash("git status"), gate.Allow, "allow-git", "", "git is fine"},
		{"ask beats allow", gate.PolicyMeta{}, []gate.Rule{allowGit, askPush}, bash("git push"), gate.Ask, "ask-push", "", "pushing needs a human"},
		{"block beats ask and allow", gate.PolicyMeta{}, []gate.Rule{allowGit, askPush, blockForce}, bash("git push --force"), gate.Block, "block-force-push", "force_push", "no force pushes"},
		{"first ask in order wins", gate.PolicyMeta{}, []gate.Rule{askForce, askPush}, bash("git push --force"), gate.Ask, "ask-force", "", "force needs a human"},
		{"first block in order wins", gate.PolicyMeta{}, []gate.Rule{blockMain, blockForce}, bash("git push --force main"), gate.Block, "block-main", "main_branch", "not on main"},
		{"no match, default Allow", gate.PolicyMeta{}, []gate.Rule{blockForce}, bash("ls"), gate.Allow, "", "", "no rule matched"},
		{"no match, default Ask", gate.PolicyMeta{DefaultAction: gate.Ask}, []gate.Rule{blockForce}, bash("ls"), gate.Ask, "", gate.CodeDefaultAction, "no rule matched; the policy's defaultAction is Ask"},
		{"no match, default Block", gate.PolicyMeta{DefaultAction: gate.Block}, []gate.Rule{blockForce}, bash("ls"), gate.Block, "", gate.CodeDefaultAction, "no rule allows this call and the policy's defaultAction is Block"},
		{"no rules at all", gate.PolicyMeta{}, nil, bash("ls"), gate.Allow, "", "", "no rule matched"},
		{"rule without when always applies", gate.PolicyMeta{}, []gate.Rule{{Name: "all-bash", Tools: []string{"bash"}, Action: gate.Ask, Reason: "every command"}}, bash("ls"), gate.Ask, "all-bash", "", "every command"},
		{"rule without tools applies to every tool", gate.PolicyMeta{}, []gate.Rule{{Name: "everything", When: `surface == "hook"`, Action: gate.Block, Reason: "no hooks"}}, &gate.Call{Tool: "Read", Input: map[string]any{"file_path": "/x"}, Surface: gate.SurfaceHook}, gate.Block, "everything", "", "no hooks"},
		{"rule for another tool does not apply", gate.PolicyMeta{}, []gate.Rule{blockForce}, &gate.Call{Tool: "Write", Input: map[string]any{"command": "git push --force"}}, gate.Allow, "", "", "no rule matched"},
		{"erroring rule blocks under Fail", gate.PolicyMeta{FailurePolicy: gate.Fail}, []gate.Rule{erroring}, bash("ls"), gate.Block, "needs-field", gate.CodeRuleError, "rule needs-field could not be evaluated: no_such_key"},
		{"erroring rule is skipped under Ignore", gate.PolicyMeta{FailurePolicy: gate.Ignore}, []gate.Rule{erroring, askPush}, bash("git push"), gate.Ask, "ask-push", "", "pushing needs a human"},
		{"erroring rule after a block is never reached", gate.PolicyMeta{}, []gate.Rule{blockMain, erroring}, bash("git checkout main"), gate.Block, "block-main", "main_branch", "not on main"},
		{"variables tool, server, surface, session", gate.PolicyMeta{}, []gate.Rule{{Name: "vars", When: `tool == "mcp__github__create_issue" && server == "github" && surface == "managed-agents" && session == "sesn_1"`, Action: gate.Block, Reason: "vars"}},
			&gate.Call{Tool: "create_issue", Server: "github", Input: map[string]any{}, Surface: gate.SurfaceManagedAgents, Session: "sesn_1"}, gate.Block, "vars", "", "vars"},
		{"server derived from the canonical name", gate.PolicyMeta{}, []gate.Rule{{Name: "srv", When: `server == "github"`, Action: gate.Block, Reason: "srv"}},
			&gate.Call{Tool: "mcp__github__create_issue", Input: map[string]any{}}, gate.Block, "srv", "", "srv"},
		{"strings extension", gate.PolicyMeta{}, []gate.Rule{{Name: "ext", Tools: []string{"bash"}, When: `input.command.lowerAscii().split(" ").exists(w, w == "sudo")`, Action: gate.Block, Reason: "no sudo"}},
			bash("echo hi && SUDO reboot"), gate.Block, "ext", "", "no sudo"},
		{"numbers from JSON compare with ints", gate.PolicyMeta{}, []gate.Rule{{Name: "timeout", Tools: []string{"bash"}, When: `has(input.timeout) && input.timeout > 300000`, Action: gate.Ask, Reason: "long command"}},
			&gate.Call{Tool: "Bash", Input: map[string]any{"command": "make", "timeout": float64(600000)}}, gate.Ask, "timeout", "", "long command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := gateFor(t, tc.meta, tc.rules...)
			d := g.Decide(tc.call)
			if d.Verdict != tc.verdict || d.Rule != tc.rule || d.Code != tc.code || d.Reason != tc.reason {
				t.Fatalf("got verdict=%s rule=%q code=%q reason=%q\nwant verdict=%s rule=%q code=%q reason=%q", d.Verdict, d.Rule, d.Code, d.Reason, tc.verdict, tc.rule, tc.code, tc.reason)
			}
			if d.IncidentID == "" {
				t.Error("decision has no incident ID")
			}
			wantMsg := ""
			if tc.verdict == gate.Block {
				wantMsg = "[Intutic Governance] BLOCKED: " + tc.reason
			}
			if d.Message != wantMsg {
				t.Errorf("message = %q, want %q", d.Message, wantMsg)
			}
			if d.SnapshotDigest == "" {
				t.Error("decision does not carry the snapshot digest")
			}
		})
	}
}

func TestCostLimitBlocksUnderFail(t *testing.T) {
	expensive := gate.Rule{Name: "expensive", Tools: []string{"bash"}, Action: gate.Allow, Reason: "never",
		When: `input.command.split("").all(a, input.command.split("").all(b, input.command.split("").all(c, a != "\u0000")))`}
	g := gateFor(t, gate.PolicyMeta{}, expensive)
	d := g.Decide(bash(strings.Repeat("x", 200)))
	if d.Verdict != gate.Block || d.Code != gate.CodeInputTooCostly || !strings.Contains(d.Reason, "cost limit") {
		t.Fatalf("want an input_too_costly Block for exceeding the cost limit, got %+v", d)
	}
}

func TestRenderInput(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want string // "" for an input that does not decode
	}{
		{"object", map[string]any{"command": "ls"}, `map[command:ls]`},
		{"JSON object string", `{"command":"ls"}`, `map[command:ls]`},
		{"JSON array string", `[1,"a"]`, `map[args:[[1 a]]]`},
		{"JSON number string", `42`, `map[args:[42]]`},
		{"JSON string string", `"rm -rf /"`, `map[args:[rm -rf /]]`},
		// Text that is not JSON does not decode: it is refused, not wrapped in args.
		{"plain string", `rm -rf /`, ``},
		{"number beyond float64", `{"n":1e999}`, ``},
		{"number", 3.5, `map[args:[3.5]]`},
		{"array", []any{"a", "b"}, `map[args:[[a b]]]`},
		{"null", nil, `map[args:[<nil>]]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := gate.RenderInput(tc.in)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("RenderInput(%#v) = %s, want an error", tc.in, fmtValue(m))
				}
				return
			}
			if got := fmtValue(m); err != nil || got != tc.want {
				t.Fatalf("RenderInput(%#v) = %s, %v, want %s", tc.in, got, err, tc.want)
			}
		})
	}
	// A string input is what the harness sends for some tools: rules see the parsed object.
	g := gateFor(t, gate.PolicyMeta{}, gate.Rule{Name: "r", When: `input.command == "ls"`, Action: gate.Block, Reason: "ls"})
	if d := g.Decide(&gate.Call{Tool: "Bash", Input: mustRender(t, `{"command":"ls"}`)}); d.Verdict != gate.Block {
		t.Fatalf("a JSON string input was not parsed: %+v", d)
	}
	g = gateFor(t, gate.PolicyMeta{}, gate.Rule{Name: "r", When: `input.args[0] == "ls"`, Action: gate.Block, Reason: "ls"})
	if d := g.Decide(&gate.Call{Tool: "custom", Input: mustRender(t, `"ls"`)}); d.Verdict != gate.Block {
		t.Fatalf("a JSON string holding a plain string was not wrapped in args: %+v", d)
	}
}

func mustRender(t *testing.T, v any) map[string]any {
	t.Helper()
	m, err := gate.RenderInput(v)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFailClosed(t *testing.T) {
	dir := t.TempDir()
	good := build(t, gate.PolicyMeta{WorkspaceID: "ws_1"}, gate.Rule{Name: "r", Tools: []string{"bash"}, When: `input.command == "x"`, Action: gate.Block, Reason: "x"})
	goodBytes, err := good.Encode()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tampered := strings.Replace(string(goodBytes), `"reason":"x"`, `"reason":"y"`, 1)
	if tampered == string(goodBytes) {
		t.Fatal("tampering did not change the snapshot")
	}
	wrongKind := strings.Replace(string(goodBytes), `"kind":"PolicySnapshot"`, `"kind":"Policy"`, 1)
	unknownField := strings.Replace(string(goodBytes), `"policy":`, `"allowAll":true,"policy":`, 1)
	invalid, err := gate.BuildInvalidSnapshot(gate.PolicyMeta{Policy: "agents/broken", WorkspaceID: "ws_1"}, "spec.rules[0].when: undeclared reference to 'inptu'")
	if err != nil {
		t.Fatal(err)
	}
	invalidBytes, _ := invalid.Encode()

	cases := []struct {
		name      string
		path      string
		workspace string
		code      string
	}{
		{"file absent", filepath.Join(dir, "absent.rules"), "", gate.CodeSnapshotMissing},
		{"file empty", write("empty.rules", nil), "", gate.CodeSnapshotMissing},
		{"whitespace only", write("blank.rules", []byte("\n  \n")), "", gate.CodeSnapshotMissing},
		{"not JSON", write("garbage.rules", []byte("rules: yes")), "", gate.CodeSnapshotCorrupt},
		{"truncated", write("truncated.rules", goodBytes[:len(goodBytes)/2]), "", gate.CodeSnapshotCorrupt},
		{"wrong kind", write("kind.rules", []byte(wrongKind)), "", gate.CodeSnapshotCorrupt},
		{"unknown field", write("unknown.rules", []byte(unknownField)), "", gate.CodeSnapshotCorrupt},
		{"trailing data", write("trailing.rules", append(slices.Clone(goodBytes), []byte(`{}`)...)), "", gate.CodeSnapshotCorrupt},
		{"digest mismatch", write("tampered.rules", []byte(tampered)), "", gate.CodeSnapshotUnverified},
		{"another workspace", write("good.rules", goodBytes), "ws_2", gate.CodeSnapshotUnverified},
		{"never compiled", write("invalid.rules", invalidBytes), "ws_1", gate.CodePolicyInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := gate.New(tc.workspace)
			loadErr := g.LoadFile(tc.path)
			d := g.Decide(bash("ls"))
			if d.Verdict != gate.Block || d.Code != tc.code {
				t.Fatalf("got %s/%s (%s), want Block/%s", d.Verdict, d.Code, d.Reason, tc.code)
			}
			if !strings.HasPrefix(d.Message, gate.RefusalPrefix) {
				t.Errorf("refusal message %q lacks the prefix", d.Message)
			}
			if tc.code != gate.CodePolicyInvalid {
				var se *gate.SnapshotError
				if !errors.As(loadErr, &se) || se.Code != tc.code {
					t.Errorf("LoadFile error = %v, want code %s", loadErr, tc.code)
				}
			}
		})
	}

	t.Run("no snapshot loaded", func(t *testing.T) {
		if d := gate.New("").Decide(bash("ls")); d.Verdict != gate.Block || d.Code != gate.CodeSnapshotMissing {
			t.Fatalf("got %+v", d)
		}
	})
	t.Run("a failed reload replaces a good snapshot", func(t *testing.T) {
		g := gate.New("ws_1")
		if err := g.LoadFile(write("good2.rules", goodBytes)); err != nil {
			t.Fatal(err)
		}
		if d := g.Decide(bash("ls")); d.Verdict != gate.Allow {
			t.Fatalf("good snapshot: %+v", d)
		}
		_ = g.LoadFile(write("tampered2.rules", []byte(tampered)))
		if d := g.Decide(bash("ls")); d.Verdict != gate.Block || d.Code != gate.CodeSnapshotUnverified {
			t.Fatalf("after a tampered reload: %+v", d)
		}
	})
	t.Run("panic during evaluation", func(t *testing.T) {
		g := gateFor(t, gate.PolicyMeta{})
		d := g.Decide(nil) // a nil call panics inside evaluation
		if d.Verdict != gate.Block || d.Code != gate.CodeGateCrashed {
			t.Fatalf("got %+v", d)
		}
		// A panic's message may quote the input, and reasons are logged: only its type shows.
		if strings.Contains(d.Reason, "nil pointer") {
			t.Fatalf("the reason carries the panic's message: %q", d.Reason)
		}
	})
}

func TestValidateRulesFieldErrors(t *testing.T) {
	rules := []gate.Rule{
		{Name: "ok", Tools: []string{"bash"}, When: `input.command.contains("x")`, Action: gate.Block, Reason: "x"},
		{Name: "syntax", When: `input.command.contains(`, Action: gate.Block, Reason: "x"},
		{Name: "not-bool", When: `"yes"`, Action: gate.Block, Reason: "x"},
		{Name: "undeclared", When: `inptu.command == "x"`, Action: gate.Block, Reason: "x"},
		{Name: "bad-glob", Tools: []string{"bash", "[unclosed"}, Action: gate.Block, Reason: "x"},
		{Name: "ok", Action: gate.Allow},
		{Name: "bad-action", Action: "Deny"},
	}
	errs := gate.ValidateRules(rules)
	want := map[string]string{
		"spec.rules[1].when":     "Syntax error",
		"spec.rules[2].when":     "must evaluate to bool, not string",
		"spec.rules[3].when":     "undeclared reference to 'inptu'",
		"spec.rules[4].tools[1]": "is not a valid glob pattern",
		"spec.rules[5].name":     `"ok" is already the name of spec.rules[0]`,
		"spec.rules[6].action":   `"Deny" is not Allow, Ask or Block`,
	}
	got := map[string]string{}
	for _, e := range errs {
		got[e.Field] = e.Message
	}
	for field, msg := range want {
		if !strings.Contains(got[field], msg) {
			t.Errorf("%s: got %q, want a message containing %q", field, got[field], msg)
		}
	}
	if len(errs) != len(want) {
		t.Errorf("got %d errors, want %d: %v", len(errs), len(want), errs)
	}
	if _, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "a/b"}, rules); err == nil {
		t.Error("BuildSnapshot accepted rules that do not compile")
	}
}

func TestCompileForCompilesOnlyMatchingRules(t *testing.T) {
	s := build(t, gate.PolicyMeta{},
		gate.Rule{Name: "bash-rule", Tools: []string{"bash"}, When: `input.command == "x"`, Action: gate.Block, Reason: "x"},
		gate.Rule{Name: "write-rule", Tools: []string{"write"}, When: `input.file_path == "/etc/passwd"`, Action: gate.Block, Reason: "passwd"},
	)
	// Break the write rule's expression (in memory, past the digest): a policy compiled for
	// Bash never compiles it.
	s.Rules[1].When = `input.file_path ==`
	p, errs := gate.CompileFor(s, "Bash", "")
	if len(errs) != 0 {
		t.Fatalf("CompileFor(Bash) compiled the write rule: %v", errs)
	}
	if d := p.Decide(bash("x")); d.Verdict != gate.Block || d.Rule != "bash-rule" {
		t.Fatalf("got %+v", d)
	}
	if d := p.Decide(&gate.Call{Tool: "Write", Input: map[string]any{"file_path": "/etc/passwd"}}); d.Verdict != gate.Block || d.Code != gate.CodeToolMismatch {
		t.Fatalf("a policy compiled for Bash must refuse other tools, got %+v", d)
	}
	// No rule names Read: nothing is compiled, so nothing broken elsewhere is reported. (An
	// empty selection once meant "every rule".)
	s.Rules[0].When = `input.command ==`
	p, errs = gate.CompileFor(s, "Read", "")
	if len(errs) != 0 || gate.CompiledRules(p) != 0 {
		t.Fatalf("CompileFor(Read) compiled %d rules, errors %v; want none", gate.CompiledRules(p), errs)
	}
	if d := p.Decide(&gate.Call{Tool: "Read", Input: map[string]any{"file_path": "/etc/passwd"}}); d.Verdict != gate.Allow || d.Rule != "" {
		t.Fatalf("with no rule for Read the default action decides, got %+v", d)
	}
	s.Rules[0].When = `input.command == "x"`
	// Compiled for Write, the broken expression is compiled only when the prefilter cannot
	// rule the rule out; then the rule errors and blocks under Fail.
	p, _ = gate.CompileFor(s, "Write", "")
	if d := p.Decide(&gate.Call{Tool: "Write", Input: map[string]any{"file_path": "/etc/passwd"}}); d.Verdict != gate.Block || d.Code != gate.CodeRuleError {
		t.Fatalf("a rule that does not compile must block under Fail, got %+v", d)
	}
	// A path the prefilter proves unequal to /etc/passwd cannot match, compiled or not.
	if d := p.Decide(&gate.Call{Tool: "Write", Input: map[string]any{"file_path": "/tmp/x"}}); d.Verdict != gate.Allow {
		t.Fatalf("got %+v", d)
	}
	// Compile (the confirmer's eager path) reports the corrupt program up front.
	if _, errs := gate.Compile(s); len(errs) == 0 {
		t.Fatal("Compile did not report the broken expression")
	}
}

func TestIncidentIDsAreUniqueAndSortable(t *testing.T) {
	g := gateFor(t, gate.PolicyMeta{})
	var ids []string
	for range 1000 {
		ids = append(ids, g.Decide(bash("ls")).IncidentID)
	}
	if !slices.IsSorted(ids) {
		t.Fatal("incident IDs are not in time order")
	}
	if len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Fatal("incident IDs repeat")
	}
}

// TestConcurrentSwap decides from many goroutines while snapshots are swapped; run with -race.
func TestConcurrentSwap(t *testing.T) {
	block := build(t, gate.PolicyMeta{Generation: 1}, gate.Rule{Name: "r", Tools: []string{"bash"}, Action: gate.Block, Reason: "gen 1"})
	allow := build(t, gate.PolicyMeta{Generation: 2})
	pb, _ := gate.Compile(block)
	pa, _ := gate.Compile(allow)
	g := gate.New("")
	g.Swap(pb)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				d := g.Decide(bash("ls"))
				if d.SnapshotDigest == block.Digest && d.Verdict != gate.Block || d.SnapshotDigest == allow.Digest && d.Verdict != gate.Allow {
					t.Errorf("decision does not belong to its snapshot: %+v", d)
					return
				}
			}
		}()
	}
	for i := range 200 {
		if i%2 == 0 {
			g.Swap(pa)
		} else {
			g.Swap(pb)
		}
	}
	close(stop)
	wg.Wait()
}
