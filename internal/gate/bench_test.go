package gate_test

import (
	"fmt"
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

func mustPolicy(b testing.TB, rules []gate.Rule) *gate.Policy {
	b.Helper()
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "bench/p", Generation: 1}, rules)
	if err != nil {
		b.Fatal(err)
	}
	p, errs := gate.Compile(s)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	return p
}

var benchCalls = []struct {
	name string
	call gate.Call
}{
	{"bash", gate.Call{Tool: "Bash", Input: map[string]any{"command": "go test ./... -run TestDecide -count=1", "description": "run the tests"}, Surface: gate.SurfaceHook}},
	{"write", gate.Call{Tool: "Write", Input: map[string]any{"file_path": "/workspace/internal/gate/gate.go", "content": "package gate\n"}, Surface: gate.SurfaceHook}},
	{"webfetch", gate.Call{Tool: "WebFetch", Input: map[string]any{"url": "https://pkg.go.dev/cel.dev/cel-go", "prompt": "summarise"}, Surface: gate.SurfaceHarness}},
	{"mcp", gate.Call{Tool: "mcp__server2__deploy", Input: map[string]any{"service": "api", "environment": "staging"}, Surface: gate.SurfaceManagedAgents}},
}

// BenchmarkGuard decides pre-decoded calls against 10, 100 and 500 realistic rules.
func BenchmarkGuard(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		g := gate.New("")
		g.Swap(mustPolicy(b, gatetest.RealisticRules(n)))
		for _, bc := range benchCalls {
			b.Run(fmt.Sprintf("rules=%d/%s", n, bc.name), func(b *testing.B) {
				call := bc.call
				b.ReportAllocs()
				for b.Loop() {
					if d := g.Decide(&call); d.Verdict != gate.Allow {
						b.Fatalf("want Allow, got %+v", d)
					}
				}
			})
		}
	}
}

// BenchmarkGuardScaling keeps 10 shell rules and adds rules for other tools: the cost of a
// shell decision follows the rules that match the tool, not the total.
func BenchmarkGuardScaling(b *testing.B) {
	shell := make([]gate.Rule, 0, 10)
	for _, r := range gatetest.RealisticRules(200) {
		if len(shell) < 10 && (r.Tools[0] == "bash" || r.Tools[0] == "Bash") {
			shell = append(shell, r)
		}
	}
	for _, others := range []int{0, 90, 490} {
		rules := append([]gate.Rule{}, shell...)
		for i, r := range gatetest.RealisticRules(others * 3) {
			if len(rules) == 10+others {
				break
			}
			if r.Tools[0] != "bash" && r.Tools[0] != "Bash" {
				r.Name = fmt.Sprintf("other-%d", i)
				rules = append(rules, r)
			}
		}
		g := gate.New("")
		g.Swap(mustPolicy(b, rules))
		call := benchCalls[0].call
		b.Run(fmt.Sprintf("total=%d/matching=10", len(rules)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				g.Decide(&call)
			}
		})
	}
}

// BenchmarkGuardBlocked measures a call that the regex rule blocks (the CEL path, no prefilter skip).
func BenchmarkGuardBlocked(b *testing.B) {
	g := gate.New("")
	g.Swap(mustPolicy(b, gatetest.RealisticRules(100)))
	call := gate.Call{Tool: "Bash", Input: map[string]any{"command": "rm -rf /data3"}, Surface: gate.SurfaceHook}
	b.ReportAllocs()
	for b.Loop() {
		if d := g.Decide(&call); d.Verdict != gate.Block {
			b.Fatalf("want Block, got %+v", d)
		}
	}
}

// BenchmarkDecideLayers decides a realistic Bash call with three cluster layers (one selecting
// by label) and the namespace's policy, each of realistic rules, compiled for the call's tool
// as gate-hook does.
func BenchmarkDecideLayers(b *testing.B) {
	idx := gate.LayersIndex{Namespace: "bench", Namespaced: true}
	layers := map[string]*gate.Snapshot{}
	for i, name := range []string{"baseline", "egress", "web-tier"} {
		s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: name, Generation: 1}, gatetest.RealisticRules(30+10*i))
		if err != nil {
			b.Fatal(err)
		}
		layers[name] = s
		l := gate.Layer{Kind: gate.LayerKindCluster, Name: name, Priority: int32(i), File: gate.ClusterLayerFile(name), Digest: s.Digest}
		if name == "web-tier" {
			l.PodSelector = []gate.Requirement{{Key: "app", Operator: gate.OperatorIn, Values: []string{"web"}}}
		}
		idx.Layers = append(idx.Layers, l)
	}
	data, err := gate.BuildLayersIndex(idx)
	if err != nil {
		b.Fatal(err)
	}
	loaded, err := gate.LoadLayersIndex(data, "")
	if err != nil {
		b.Fatal(err)
	}
	primary := mustPolicy(b, gatetest.RealisticRules(100)).Snapshot()
	set, err := gate.NewLayerSet(loaded, primary, layers, map[string]string{"app": "web"})
	if err != nil {
		b.Fatal(err)
	}
	call := benchCalls[0].call
	lp := set.CompileFor(call.Tool, call.Server)
	b.ReportAllocs()
	for b.Loop() {
		if d := lp.Decide(&call); d.Verdict != gate.Allow || len(d.Layers) != 4 {
			b.Fatalf("want Allow by 4 layers, got %+v", d)
		}
	}
}
