package gate_test

import (
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
