package gate_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/; `go test` runs them as regression cases and
// `go test -fuzz FuzzX` explores from them.

func FuzzRenderInput(f *testing.F) {
	for _, s := range []string{`{"command":"ls"}`, `[1,2]`, `"x"`, `rm -rf /`, `{"a":{"b":[null,true,1e400]}}`, ``, `{`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := gate.RenderInput(s)
		if err != nil {
			if m != nil {
				t.Fatal("RenderInput returned an input with its error")
			}
			return
		}
		if m == nil {
			t.Fatal("RenderInput returned nil")
		}
		// A rendered input must be encodable: the confirmer hashes it for the audit log.
		if _, err := json.Marshal(m); err != nil {
			t.Fatalf("rendered input cannot be encoded: %v", err)
		}
	})
}

func FuzzLoadSnapshot(f *testing.F) {
	good, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "a/b", Generation: 1}, goldenRules())
	if err != nil {
		f.Fatal(err)
	}
	data, _ := good.Encode()
	f.Add(data)
	if golden, err := os.ReadFile(filepath.Join("testdata", "snapshot-invalid.golden.rules")); err == nil {
		f.Add(golden)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := gate.LoadSnapshot(data, "")
		if err != nil {
			if _, ok := err.(*gate.SnapshotError); !ok {
				t.Fatalf("LoadSnapshot error is %T, want *SnapshotError", err)
			}
			g := gate.New("")
			_ = g.Load(data)
			if d := g.Decide(&gate.Call{Tool: "Bash", Input: map[string]any{"command": "ls"}}); d.Verdict != gate.Block {
				t.Fatalf("a snapshot that does not load decided %s", d.Verdict)
			}
			return
		}
		p, _ := gate.Compile(s)
		d := p.Decide(&gate.Call{Tool: "Bash", Input: map[string]any{"command": "rm -rf /"}})
		if d.Verdict != gate.Allow && d.Verdict != gate.Ask && d.Verdict != gate.Block {
			t.Fatalf("unknown verdict %q", d.Verdict)
		}
	})
}
