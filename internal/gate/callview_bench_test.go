package gate_test

import (
	"fmt"
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

// callViewRules are rules that read the call's view, added to the realistic rules.
var callViewRules = []gate.Rule{
	{Name: "view-rm", Tools: []string{"bash"}, Action: gate.Block, Reason: "recursive rm outside /workspace",
		When: `call.commands.exists(c, c.name == "rm" && c.args.exists(a, a.startsWith("-") && a.contains("r")) && c.args.exists(a, !a.startsWith("-") && !path.resolve(c.cwd, a).isUnder("/workspace")))`},
	{Name: "view-unknown", Tools: []string{"bash"}, When: `!call.shellKnown`, Action: gate.Ask, Reason: "not statically known"},
	{Name: "view-writes", When: `call.writes.exists(p, !p.isUnder("/workspace"))`, Action: gate.Block, Reason: "writes outside /workspace"},
	{Name: "view-hosts", When: `call.hosts.exists(h, h != "pkg.go.dev" && !h.endsWith(".github.com"))`, Action: gate.Ask, Reason: "fetch"},
}

// BenchmarkGuardCallView decides the benchmark calls against 100 realistic rules plus rules that
// read the call's view: the cost of building the view once per decision.
func BenchmarkGuardCallView(b *testing.B) {
	rules := append(gatetest.RealisticRules(100), callViewRules...)
	g := gate.New("")
	g.Swap(mustPolicy(b, rules))
	for _, bc := range benchCalls {
		b.Run(fmt.Sprintf("rules=%d/%s", len(rules), bc.name), func(b *testing.B) {
			call := bc.call
			call.Cwd = "/workspace"
			b.ReportAllocs()
			for b.Loop() {
				if d := g.Decide(&call); d.Verdict != gate.Allow {
					b.Fatalf("want Allow, got %+v", d)
				}
			}
		})
	}
}

// BenchmarkViewOf builds the view of a shell call and of a file call.
func BenchmarkViewOf(b *testing.B) {
	for _, c := range []struct {
		name string
		call gate.Call
	}{
		{"bash", gate.Call{Tool: "Bash", Input: map[string]any{"command": "cd /workspace/app && go test ./... -run TestDecide 2>&1 | tail -20"}, Cwd: "/workspace"}},
		{"write", gate.Call{Tool: "Write", Input: map[string]any{"file_path": "internal/gate/gate.go", "content": "package gate\n"}, Cwd: "/workspace"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				gate.ViewOf(&c.call)
			}
		})
	}
}

// BenchmarkGuardCaller is BenchmarkGuardCallView with a rule that reads who is calling, and
// calls that say who they come from: the cost of the caller's value on top of the view's.
func BenchmarkGuardCaller(b *testing.B) {
	rules := append(gatetest.RealisticRules(100), callViewRules...)
	rules = append(rules, gate.Rule{Name: "view-caller", Action: gate.Block, Reason: "only the orchestrator",
		When: `caller.serviceAccount != "" && caller.serviceAccount != caller.namespace + "/orchestrator"`})
	g := gate.New("")
	g.Swap(mustPolicy(b, rules))
	for _, bc := range benchCalls {
		b.Run(fmt.Sprintf("rules=%d/%s", len(rules), bc.name), func(b *testing.B) {
			call := bc.call
			call.Cwd = "/workspace"
			call.Caller = gate.Caller{Pod: "coding-agent-0"}
			b.ReportAllocs()
			for b.Loop() {
				if d := g.Decide(&call); d.Verdict != gate.Allow {
					b.Fatalf("want Allow, got %+v", d)
				}
			}
		})
	}
}
