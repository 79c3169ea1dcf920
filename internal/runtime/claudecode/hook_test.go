package claudecode_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/runtime/claudecode"
)

// TestUndecodableHookInputIsRefused: a tool input Go cannot decode as Node would (a number
// Node reads as Infinity, nesting past the decoder's depth, text that is not JSON) is an error,
// whether tool_input is an object or a string holding JSON; it is never wrapped in args.
func TestUndecodableHookInputIsRefused(t *testing.T) {
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	quoted := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	cases := map[string]string{
		"object, number out of float64 range": `{"file_path":"/etc/cron.d/x","content":"x","n":1e999}`,
		"string, number out of float64 range": quoted(`{"file_path":"/etc/cron.d/x","content":"x","n":1e999}`),
		"string, nested too deep":             quoted(`{"file_path":"/etc/cron.d/x","n":` + deep + `}`),
		"string, not JSON":                    quoted(`{"file_path":"/etc/cron.d/x"`),
		"string, plain text":                  quoted(`ls -la`),
	}
	for name, toolInput := range cases {
		t.Run(name, func(t *testing.T) {
			call, _, err := claudecode.ParseHookInput([]byte(`{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":` + toolInput + `}`))
			if err == nil {
				t.Fatalf("undecodable tool_input was accepted as %v", call.Input)
			}
			if strings.Contains(err.Error(), "1e999") || strings.Contains(err.Error(), "ls -la") {
				t.Fatalf("the error quotes the input: %v", err)
			}
		})
	}
	// What decodes keeps its shape: a string holding a non-object is wrapped in args.
	call, _, err := claudecode.ParseHookInput([]byte(`{"tool_name":"custom","tool_input":"[1,\"a\"]"}`))
	if err != nil || fmt.Sprint(call.Input) != `map[args:[[1 a]]]` {
		t.Fatalf("got %v, %v", call, err)
	}
}

// TestStrictHookInput: the hook input is read as the JavaScript that wrote it reads it back:
// field names are case-sensitive and nothing may follow the value; unknown fields are ignored.
func TestStrictHookInput(t *testing.T) {
	hook := `{"hook_event_name":"PreToolUse","tool_name":"Bash","TOOL_NAME":"Read","tool_input":{"command":"rm -rf /"}}`
	if call, _, err := claudecode.ParseHookInput([]byte(hook)); err == nil {
		t.Fatalf("a hook field named in another case was accepted: %+v", call)
	}
	hook = `{"hook_event_name":"PreToolUse","tool_name":"mcp__a__b","mcp_server":{"name":"a","NAME":"b"},"tool_input":{}}`
	if call, _, err := claudecode.ParseHookInput([]byte(hook)); err == nil {
		t.Fatalf("a nested hook field named in another case was accepted: %+v", call)
	}
	for _, trailing := range []string{"}", "]", `{"tool_name":"Read"}`} {
		if _, _, err := claudecode.ParseHookInput([]byte(`{"tool_name":"Bash","tool_input":{}}` + trailing)); err == nil {
			t.Fatalf("hook input with trailing %q was accepted", trailing)
		}
	}
	// Unknown fields stay allowed in the hook input: Claude Code adds fields between releases.
	if _, _, err := claudecode.ParseHookInput([]byte(`{"tool_name":"Bash","tool_input":{},"new_field":1}` + "\n")); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkParseHookInput is what gate-hook pays to read a PreToolUse call.
func BenchmarkParseHookInput(b *testing.B) {
	in := []byte(`{"session_id":"9b2c1f0e-4d1a-4a57-8f0e-1c2d3e4f5a6b","transcript_path":"/home/agent/.claude/projects/w/9b2c.jsonl","cwd":"/workspace","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"go test ./... -count=1","description":"Run it"},"tool_use_id":"toolu_01ABCDEF"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := claudecode.ParseHookInput(in); err != nil {
			b.Fatal(err)
		}
	}
}
