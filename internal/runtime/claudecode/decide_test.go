//go:build !nocel

package claudecode_test

import (
	"encoding/json"
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
	"github.com/intutic/gate-operator/internal/runtime/claudecode"
)

// The hook contract on decisions of the gate, which a build without CEL cannot make.

// hookRules are the gate's golden rules (internal/gate snapshot_test.go).
func hookRules() []gate.Rule {
	return []gate.Rule{
		{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.matches("rm\\s+-rf\\s+/")`, Action: gate.Block, Reason: "destructive command on the root filesystem", Code: "destructive_command"},
		{Name: "fetch-needs-human", Tools: []string{"web_fetch"}, When: `!input.url.startsWith("https://github.com/") && input.url != ""`, Action: gate.Ask, Reason: "fetching from outside github.com needs a human"},
		{Name: "no-prod-deploys", Tools: []string{"mcp__deploy__*"}, When: `has(input.environment) && input.environment == "production"`, Action: gate.Block, Reason: "production deploys go through the release pipeline", Code: "production_deploy"},
		{Name: "reads-ok", Tools: []string{"read", "glob", "grep"}, Action: gate.Allow},
	}
}

func bash(cmd string) *gate.Call {
	return &gate.Call{Tool: "Bash", Input: map[string]any{"command": cmd}, Surface: gate.SurfaceHook}
}

func TestHookInputCwd(t *testing.T) {
	call, _, err := claudecode.ParseHookInput([]byte(`{"session_id":"s","cwd":"/workspace/app","hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":"../../etc/passwd","content":""},"tool_use_id":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	if call.Cwd != "/workspace/app" {
		t.Fatalf("cwd %q", call.Cwd)
	}
	if v := gate.ViewOf(call); len(v.Writes) != 1 || v.Writes[0] != "/etc/passwd" || v.Cwd != "/workspace/app" {
		t.Errorf("view %+v", v)
	}
}

// TestAuditedHookResponse: an audited Block exits 0 without a permission decision and tells
// the user in systemMessage; stderr stays quiet.
func TestAuditedHookResponse(t *testing.T) {
	g := gatetest.GateWith(t, gate.PolicyMeta{Enforcement: gate.Audit}, gate.Rule{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.contains("rm -rf /")`, Action: gate.Block, Reason: "destructive command"})
	d := g.Decide(bash("rm -rf /"))
	for _, explicit := range []bool{false, true} {
		out, stderr, exit := claudecode.HookResponse(d, explicit)
		var got claudecode.HookOutput
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("stdout %q: %v", out, err)
		}
		wantDecision := map[bool]string{false: "", true: "allow"}[explicit]
		if exit != 0 || stderr != "" || got.SystemMessage != "[Intutic Governance] AUDIT: would block: destructive command" ||
			got.HookSpecificOutput.HookEventName != "PreToolUse" || got.HookSpecificOutput.PermissionDecision != wantDecision {
			t.Fatalf("explicitAllow=%v: exit %d, stderr %q, stdout %s", explicit, exit, stderr, out)
		}
	}
	if out, _, _ := claudecode.HookResponse(g.Decide(bash("ls")), false); out != nil {
		t.Fatalf("an Allow with nothing audited printed %s", out)
	}
}

// Seed corpora live in testdata/fuzz/<FuzzName>/; `go test` runs them as regression cases and
// `go test -fuzz FuzzX` explores from them.

func FuzzHookInput(f *testing.F) {
	f.Add([]byte(`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf /"},"tool_use_id":"t"}`))
	f.Add([]byte(`{"hook_event_name":"PreToolUse","tool_name":"mcp__deploy__run","tool_input":{"environment":"production"},"mcp_server":{"name":"deploy","source":"project"}}`))
	f.Add([]byte(`{"hook_event_name":"PostToolUse","tool_name":"Bash"}`))
	f.Add([]byte(`{"tool_name":"Bash","tool_input":"{\"command\":\"ls\"}"}`))
	f.Add([]byte(`not json`))
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "a/b", Generation: 1}, hookRules())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		call, _, err := claudecode.ParseHookInput(data)
		if err != nil {
			out, _, exit := claudecode.HookResponse(gate.Refuse(gate.CodeInputInvalid, err.Error()), false)
			if exit != 2 || len(out) == 0 {
				t.Fatalf("malformed hook input must be denied with exit 2, got exit %d", exit)
			}
			return
		}
		p, _ := gate.CompileFor(s, call.Tool, call.Server)
		d := p.Decide(call)
		out, _, exit := claudecode.HookResponse(d, false)
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
