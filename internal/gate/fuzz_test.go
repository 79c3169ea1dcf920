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

func FuzzHookInput(f *testing.F) {
	f.Add([]byte(`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf /"},"tool_use_id":"t"}`))
	f.Add([]byte(`{"hook_event_name":"PreToolUse","tool_name":"mcp__deploy__run","tool_input":{"environment":"production"},"mcp_server":{"name":"deploy","source":"project"}}`))
	f.Add([]byte(`{"hook_event_name":"PostToolUse","tool_name":"Bash"}`))
	f.Add([]byte(`{"tool_name":"Bash","tool_input":"{\"command\":\"ls\"}"}`))
	f.Add([]byte(`not json`))
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "a/b", Generation: 1}, goldenRules())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		call, _, err := gate.ParseHookInput(data)
		if err != nil {
			out, _, exit := gate.HookResponse(gate.Refuse(gate.CodeInputInvalid, err.Error()), false)
			if exit != 2 || len(out) == 0 {
				t.Fatalf("malformed hook input must be denied with exit 2, got exit %d", exit)
			}
			return
		}
		p, _ := gate.CompileFor(s, call.Tool, call.Server)
		d := p.Decide(call)
		out, _, exit := gate.HookResponse(d, false)
		switch d.Verdict {
		case gate.Allow:
			if exit != 0 || len(out) != 0 {
				t.Fatalf("Allow must exit 0 silently, got exit %d %q", exit, out)
			}
		case gate.Ask:
			if exit != 0 {
				t.Fatalf("Ask must exit 0, got %d", exit)
			}
		case gate.Block:
			if exit != 2 {
				t.Fatalf("Block must exit 2, got %d", exit)
			}
		}
	})
}
