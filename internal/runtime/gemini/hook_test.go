package gemini_test

import (
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/gemini"
)

// Inputs as Gemini CLI 0.61.0 wrote them on a BeforeTool hook's stdin (specs/gemini-observed.md).
const (
	shellInput = `{"session_id":"d858e198-d7b7-403a-8654-a7b744863c86","transcript_path":"/home/agent/.gemini/tmp/ws/chats/s.jsonl","cwd":"/workspace","hook_event_name":"BeforeTool","timestamp":"2026-12-06T09:08:48.487Z","tool_name":"run_shell_command","tool_input":{"command":"echo hi","description":"x"}}`
	mcpInput   = `{"session_id":"2fd53f5c","transcript_path":"/t","cwd":"/workspace","hook_event_name":"BeforeTool","timestamp":"2026-12-06T09:09:43.530Z","tool_name":"mcp_deploy_release","tool_input":{"environment":"prod","service":"api"},"mcp_context":{"server_name":"deploy","tool_name":"release","command":"node","args":["/srv/mcp-server.mjs"]}}`
)

func TestParseHookInput(t *testing.T) {
	call, _, err := gemini.ParseHookInput([]byte(shellInput))
	if err != nil {
		t.Fatal(err)
	}
	if call.Tool != "run_shell_command" || call.Cwd != "/workspace" || call.Session != "d858e198-d7b7-403a-8654-a7b744863c86" ||
		call.Surface != gate.SurfaceHook || call.Input["command"] != "echo hi" {
		t.Fatalf("call %+v", call)
	}
	call, _, err = gemini.ParseHookInput([]byte(mcpInput))
	if err != nil {
		t.Fatal(err)
	}
	if call.Tool != "release" || call.Server != "deploy" || gate.CanonicalToolName(call.Tool, call.Server) != "mcp__deploy__release" {
		t.Fatalf("an MCP call is decided as %q on %q", call.Tool, call.Server)
	}
	for name, in := range map[string]string{
		"another event":         `{"hook_event_name":"AfterTool","tool_name":"read_file","tool_input":{}}`,
		"no event":              `{"tool_name":"read_file","tool_input":{}}`,
		"Claude Code's event":   `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{}}`,
		"no tool":               `{"hook_event_name":"BeforeTool","tool_input":{}}`,
		"not JSON":              `BeforeTool read_file`,
		"an empty mcp_context":  `{"hook_event_name":"BeforeTool","tool_name":"mcp_deploy_release","tool_input":{},"mcp_context":{}}`,
		"an mcp_context string": `{"hook_event_name":"BeforeTool","tool_name":"mcp_deploy_release","tool_input":{},"mcp_context":"deploy"}`,
	} {
		if _, _, err := gemini.ParseHookInput([]byte(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
