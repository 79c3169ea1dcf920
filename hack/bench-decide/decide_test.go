// Package benchdecide measures one decision of the gate side by side with the same 100 rules
// evaluated by cel-go directly and by OPA (hack/bench-decide.sh runs it). The rules are 25 per
// tool, each a regular expression with a literal it requires; the call is a shell command that
// matches none of them, so every engine answers Allow.
package benchdecide

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/intutic/gate-operator/internal/gate"
)

// rule is one of the 100: a tool, the input field its regex reads, and the regex.
type rule struct {
	name, tool, field, regex string
}

// tools are the four tools the rules split between, with the field each reads and the regex
// (with %d for the rule's number) of its rules.
var tools = []struct{ tool, field, regex string }{
	{"bash", "command", `tool%d\s+--force`},
	{"write", "file_path", `^/etc/app%d/.+\.conf$`},
	{"web_fetch", "url", `https?://paste%d\.example/`},
	{"mcp__deploy__run", "environment", `^prod%d$`},
}

func rules() []rule {
	var rs []rule
	for i := range 100 {
		t := tools[i%len(tools)]
		rs = append(rs, rule{fmt.Sprintf("rule-%d", i), t.tool, t.field, fmt.Sprintf(t.regex, i)})
	}
	return rs
}

func celString(s string) string { return `"` + strings.ReplaceAll(s, `\`, `\\`) + `"` }

// The calls: one allowed (the measured case) and one blocked by rule-8 (bash), to check that
// every engine decides the same.
var (
	allowed = map[string]any{"command": "go test ./... -run TestDecide -count=1", "description": "run the tests"}
	blocked = map[string]any{"command": "tool8   --force origin", "description": "force it"}
)

// engine decides a bash call's input: true when a rule blocks it.
type engine struct {
	name   string
	decide func(testing.TB, map[string]any) bool
}

func gateEngine(tb testing.TB) engine {
	var rs []gate.Rule
	for _, r := range rules() {
		rs = append(rs, gate.Rule{Name: r.name, Tools: []string{r.tool}, When: fmt.Sprintf("input.%s.matches(%s)", r.field, celString(r.regex)), Action: gate.Block, Reason: r.name})
	}
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "bench/decide", Generation: 1}, rs)
	if err != nil {
		tb.Fatal(err)
	}
	data, err := s.Encode()
	if err != nil {
		tb.Fatal(err)
	}
	g := gate.New("")
	if err := g.Load(data); err != nil {
		tb.Fatal(err)
	}
	return engine{"gate-operator", func(tb testing.TB, in map[string]any) bool {
		call := gate.Call{Tool: "Bash", Input: in, Surface: gate.SurfaceHook}
		return g.Decide(&call).Verdict == gate.Block
	}}
}

// celEngine compiles each rule to a cel-go program in the gate's variables; with all set it
// evaluates all 100 (each guarded by its tool), otherwise only the 25 of the call's tool.
func celEngine(tb testing.TB, all bool) engine {
	env, err := cel.NewEnv(
		cel.Variable("tool", cel.StringType),
		cel.Variable("input", cel.MapType(cel.StringType, cel.DynType)),
		ext.Strings(),
	)
	if err != nil {
		tb.Fatal(err)
	}
	var prgs []cel.Program
	for _, r := range rules() {
		expr := fmt.Sprintf("input.%s.matches(%s)", r.field, celString(r.regex))
		if all {
			expr = fmt.Sprintf("tool == %q && %s", r.tool, expr)
		} else if r.tool != "bash" {
			continue
		}
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			tb.Fatal(iss.Err())
		}
		prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
		if err != nil {
			tb.Fatal(err)
		}
		prgs = append(prgs, prg)
	}
	name := "cel-go, the tool's 25 rules"
	if all {
		name = "cel-go, all 100 rules"
	}
	return engine{name, func(tb testing.TB, in map[string]any) bool {
		act, err := interpreter.NewActivation(map[string]any{"tool": "bash", "input": in})
		if err != nil {
			tb.Fatal(err)
		}
		hit := false
		for _, prg := range prgs {
			out, _, err := prg.Eval(act)
			if err != nil {
				tb.Fatal(err)
			}
			hit = hit || out == types.True
		}
		return hit
	}}
}

// opaEngine writes the rules as one Rego module: a rule per regex, keyed on input.tool, which
// OPA indexes, so it evaluates only the call's tool's rules.
func opaEngine(tb testing.TB) engine {
	var b strings.Builder
	b.WriteString("package gate\n\nimport rego.v1\n\ndefault verdict := \"Allow\"\n\nverdict := \"Block\" if count(blocked) > 0\n\n")
	for _, r := range rules() {
		fmt.Fprintf(&b, "blocked contains %q if {\n\tinput.tool == %q\n\tregex.match(`%s`, input.input.%s)\n}\n\n", r.name, r.tool, r.regex, r.field)
	}
	pq, err := rego.New(rego.Query("data.gate.verdict"), rego.Module("gate.rego", b.String())).PrepareForEval(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return engine{"OPA", func(tb testing.TB, in map[string]any) bool {
		rs, err := pq.Eval(context.Background(), rego.EvalInput(map[string]any{"tool": "bash", "input": in}))
		if err != nil || len(rs) != 1 {
			tb.Fatal(err, rs)
		}
		return rs[0].Expressions[0].Value == "Block"
	}}
}

func engines(tb testing.TB) []engine {
	return []engine{gateEngine(tb), celEngine(tb, false), celEngine(tb, true), opaEngine(tb)}
}

// TestEnginesAgree: every engine allows the measured call and blocks the other one.
func TestEnginesAgree(t *testing.T) {
	for _, e := range engines(t) {
		if e.decide(t, allowed) {
			t.Errorf("%s blocks the allowed call", e.name)
		}
		if !e.decide(t, blocked) {
			t.Errorf("%s allows the blocked call", e.name)
		}
	}
}

// BenchmarkDecide decides the allowed call with each engine.
func BenchmarkDecide(b *testing.B) {
	for _, e := range engines(b) {
		b.Run(strings.NewReplacer(" ", "_", ",", "").Replace(e.name), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if e.decide(b, allowed) {
					b.Fatal("blocked")
				}
			}
		})
	}
}
