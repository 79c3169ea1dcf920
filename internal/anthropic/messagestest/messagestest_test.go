package messagestest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStandIn drives the stand-in as Claude Code and the conformance suite do: the control
// path arms it, the first turn calls the scripted tool, the turn carrying the tool_result ends
// the conversation, and the tool_result is read back.
func TestStandIn(t *testing.T) {
	srv := httptest.NewServer(&Server{})
	defer srv.Close()
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	result := func() ToolResult {
		t.Helper()
		_, body := do(http.MethodGet, ToolResultPath, "")
		var r ToolResult
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return r
	}

	if _, body := do(http.MethodPost, "/v1/messages", `{"messages":[{"role":"user","content":"hi"}]}`); !strings.Contains(body, `"stop_reason":"end_turn"`) {
		t.Errorf("unscripted, the stand-in must answer with text; got %s", body)
	}
	if code, _ := do(http.MethodPut, ScriptPath, `{"tool":"Bash","input":{"command":"touch /workspace/x"}}`); code != http.StatusNoContent {
		t.Fatalf("PUT %s: %d", ScriptPath, code)
	}
	_, body := do(http.MethodPost, "/v1/messages?beta=true", `{"messages":[{"role":"user","content":"do the task"}]}`)
	if !strings.Contains(body, `"name":"Bash"`) || !strings.Contains(body, `"stop_reason":"tool_use"`) {
		t.Fatalf("the first turn must call Bash; got %s", body)
	}
	var partial string
	for _, line := range strings.Split(body, "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, "input_json_delta") {
			var ev struct {
				Delta struct {
					PartialJSON string `json:"partial_json"`
				}
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatal(err)
			}
			partial = ev.Delta.PartialJSON
		}
	}
	if partial != `{"command":"touch /workspace/x"}` {
		t.Errorf("the tool input streamed as %q", partial)
	}
	if r := result(); r.Answered {
		t.Errorf("no tool_result yet, got %+v", r)
	}

	toolResult := `{"messages":[{"role":"user","content":"do the task"},{"role":"assistant","content":[]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01GATE","is_error":true,"content":"BLOCKED"}]}]}`
	if _, body := do(http.MethodPost, "/v1/messages", toolResult); !strings.Contains(body, `"stop_reason":"end_turn"`) {
		t.Errorf("the turn carrying the tool_result must end the conversation; got %s", body)
	}
	if r := result(); !r.Answered || !r.IsError || r.Content != `"BLOCKED"` {
		t.Errorf("tool result %+v", r)
	}
	if code, _ := do(http.MethodPost, "/v1/messages/count_tokens", "{}"); code != http.StatusNotFound {
		t.Errorf("count_tokens: %d, want 404", code)
	}

	// A new script forgets the old results.
	do(http.MethodPut, ScriptPath, `{"tool":"Write","input":{}}`)
	if r := result(); r.Answered {
		t.Errorf("after a new script: %+v", r)
	}
	if code, _ := do(http.MethodPut, ScriptPath, `not json`); code != http.StatusBadRequest {
		t.Errorf("a bad script: %d, want 400", code)
	}
}
