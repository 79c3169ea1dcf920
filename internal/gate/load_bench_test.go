package gate_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

// BenchmarkLoadSnapshot is what gate-hook pays to read and verify a 100-rule snapshot
// (claudecode's BenchmarkParseHookInput, to read a PreToolUse call).
func BenchmarkLoadSnapshot(b *testing.B) {
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "bench/hook", Generation: 1}, gatetest.RealisticRules(100))
	if err != nil {
		b.Fatal(err)
	}
	data, err := s.Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := gate.LoadSnapshot(data, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileFor is what gate-hook pays to pick and prepare a call's rules of 100.
func BenchmarkCompileFor(b *testing.B) {
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "bench/hook", Generation: 1}, gatetest.RealisticRules(100))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := gate.CompileFor(s, "Bash", ""); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

// BenchmarkLoadLayered is what gate-hook --layers pays to read a bundle of three cluster
// layers (one selecting by label) and the namespace's policy, of realistic rules, from a
// volume laid out as the kubelet writes it, and compile it for a Bash call.
func BenchmarkLoadLayered(b *testing.B) {
	idx := gate.LayersIndex{Namespace: "bench", Namespaced: true}
	var layers []*gate.Snapshot
	for i, name := range []string{"baseline", "egress", "web-tier"} {
		s := clusterSnap(b, name, gate.PolicyMeta{Generation: 1}, gatetest.RealisticRules(30+10*i)...)
		layers = append(layers, s)
		l := layerOf(s, int32(i))
		if name == "web-tier" {
			l.PodSelector = []gate.Requirement{{Key: "app", Operator: gate.OperatorIn, Values: []string{"web"}}}
		}
		idx.Layers = append(idx.Layers, l)
	}
	files := bundle(b, idx, nsSnap(b, gate.PolicyMeta{Policy: "bench/hook"}, gatetest.RealisticRules(100)...), layers...)
	files[gate.PodLabelsFile] = []byte("app=\"web\"\npod-template-hash=\"5d8f7c9b4\"\n")
	files[gate.PodNameFile] = []byte("agent-0")
	dir := b.TempDir()
	const ts = "..2026_12_04_22_00_00.0001"
	for name, data := range files {
		path := filepath.Join(dir, ts, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.Symlink(ts, filepath.Join(dir, "..data")); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		set, err := gate.LoadLayered(dir, "")
		if err != nil {
			b.Fatal(err)
		}
		if lp := set.CompileFor("Bash", ""); lp == nil || len(set.Layers()) != 4 {
			b.Fatalf("layers %q", set.Layers())
		}
	}
}
