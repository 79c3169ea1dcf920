package codex_test

import (
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/codex"
)

// Inputs as codex-cli 0.171.0 wrote them on a PreToolUse hook's stdin (specs/codex-observed.md).
const (
	shellInput = `{"session_id":"01a24a9c-e4a1-7980-bb8e-c265868d3fd1","turn_id":"01a24a9c-e4c3-7293-a019-f41f1d76e74d","transcript_path":"/h/sessions/r.jsonl","cwd":"/workspace","hook_event_name":"PreToolUse","model":"gpt-5","permission_mode":"bypassPermissions","tool_name":"Bash","tool_input":{"command":"echo hello > f.txt; echo ran"},"tool_use_id":"call_1"}`
	patchInput = `{"session_id":"s","turn_id":"t","cwd":"/workspace","hook_event_name":"PreToolUse","model":"gpt-5.5","permission_mode":"bypassPermissions","tool_name":"apply_patch","tool_input":{"command":"*** Begin Patch\n*** Add File: added.txt\n+new file\n*** Delete File: del.txt\n*** End Patch"},"tool_use_id":"call_1"}`
	mcpInput   = `{"session_id":"s","turn_id":"t","cwd":"/workspace","hook_event_name":"PreToolUse","model":"gpt-5","permission_mode":"bypassPermissions","tool_name":"mcp__deploy__release","tool_input":{"environment":"prod","service":"api"},"tool_use_id":"call_1"}`
)

func TestParseHookInput(t *testing.T) {
	call, in, err := codex.ParseHookInput([]byte(shellInput))
	if err != nil {
		t.Fatal(err)
	}
	if call.Tool != "Bash" || call.Cwd != "/workspace" || call.Session != "01a24a9c-e4a1-7980-bb8e-c265868d3fd1" ||
		call.Surface != gate.SurfaceHook || call.Input["command"] != "echo hello > f.txt; echo ran" || in.TurnID == "" {
		t.Fatalf("call %+v", call)
	}
	call, _, err = codex.ParseHookInput([]byte(patchInput))
	if err != nil {
		t.Fatal(err)
	}
	if v := gate.ViewOf(call); v.Kind != gate.KindWrite || len(v.Writes) != 2 || v.Writes[0] != "/workspace/added.txt" || v.Writes[1] != "/workspace/del.txt" {
		t.Fatalf("apply_patch view %+v", v)
	}
	call, _, err = codex.ParseHookInput([]byte(mcpInput))
	if err != nil {
		t.Fatal(err)
	}
	if gate.CanonicalToolName(call.Tool, call.Server) != "mcp__deploy__release" || gate.ViewOf(call).Kind != gate.KindMCP {
		t.Fatalf("an MCP call is %q", call.Tool)
	}
	for name, in := range map[string]string{
		"Gemini CLI's event": `{"hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{}}`,
		"no event":           `{"tool_name":"Bash","tool_input":{}}`,
		"no tool":            `{"hook_event_name":"PreToolUse","tool_input":{}}`,
		"not JSON":           `PreToolUse Bash`,
	} {
		if _, _, err := codex.ParseHookInput([]byte(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
