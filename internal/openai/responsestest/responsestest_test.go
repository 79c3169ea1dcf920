package responsestest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// doneItem returns the item of the stream's response.output_item.done event.
func doneItem(t *testing.T, body string) map[string]any {
	t.Helper()
	var item map[string]any
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || !strings.Contains(data, `"response.output_item.done"`) {
			continue
		}
		var ev struct {
			Item map[string]any `json:"item"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		item = ev.Item
	}
	if item == nil {
		t.Fatalf("no response.output_item.done in %s", body)
	}
	if !strings.Contains(body, "event: response.created\n") || !strings.Contains(body, "event: response.completed\n") {
		t.Errorf("the stream must open with response.created and close with response.completed: %s", body)
	}
	return item
}

// TestStandIn drives the stand-in as Codex and the conformance suite do: the control path arms
// it, the first turn calls the scripted tool, the turn carrying the call's output ends the
// conversation, and the output is read back.
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
		if resp.StatusCode == http.StatusOK && strings.HasSuffix(path, "/responses") &&
			resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Errorf("content type %q", resp.Header.Get("Content-Type"))
		}
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
	const first = `{"model":"gpt-5","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"do the task"}]}]}`

	if _, body := do(http.MethodPost, "/v1/responses", first); doneItem(t, body)["type"] != "message" {
		t.Errorf("unscripted, the stand-in must answer with text; got %s", body)
	}

	// A function_call: exec_command with its arguments JSON-encoded as a string.
	if code, _ := do(http.MethodPut, ScriptPath, `{"name":"exec_command","arguments":{"cmd":"touch /workspace/x"}}`); code != http.StatusNoContent {
		t.Fatalf("PUT %s: %d", ScriptPath, code)
	}
	_, body := do(http.MethodPost, "/v1/responses", first)
	item := doneItem(t, body)
	if item["type"] != "function_call" || item["name"] != "exec_command" || item["call_id"] != CallID ||
		item["arguments"] != `{"cmd":"touch /workspace/x"}` {
		t.Fatalf("the first turn must call exec_command; got %v", item)
	}
	if _, ok := item["namespace"]; ok {
		t.Errorf("no namespace was scripted: %v", item)
	}
	if r := result(); r.Answered {
		t.Errorf("no output yet, got %+v", r)
	}
	withOutput := `{"model":"gpt-5","input":[{"type":"message","role":"user","content":[]},` +
		`{"type":"function_call","call_id":"call_1","name":"exec_command","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"Command blocked by PreToolUse hook: no"}]}`
	if _, body := do(http.MethodPost, "/v1/responses", withOutput); doneItem(t, body)["type"] != "message" {
		t.Errorf("the turn carrying the output must end with text; got %s", body)
	}
	if r := result(); !r.Answered || r.Type != "function_call_output" || r.Content != "Command blocked by PreToolUse hook: no" {
		t.Errorf("tool result %+v", r)
	}

	// An MCP tool: a function_call in its namespace; a non-string output is kept as JSON.
	do(http.MethodPut, ScriptPath, `{"name":"release","namespace":"mcp__deploy","arguments":{"service":"api"}}`)
	if r := result(); r.Answered {
		t.Errorf("after a new script: %+v", r)
	}
	_, body = do(http.MethodPost, "/v1/responses", first)
	if item := doneItem(t, body); item["namespace"] != "mcp__deploy" || item["name"] != "release" {
		t.Errorf("mcp call %v", item)
	}
	do(http.MethodPost, "/v1/responses", `{"input":[{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_text","text":"released"}]}]}`)
	if r := result(); r.Content != `[{"text":"released","type":"input_text"}]` {
		t.Errorf("mcp output %+v", r)
	}

	// A custom_tool_call: apply_patch with free-form input; outputs for other calls are ignored.
	patch := "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch"
	b, _ := json.Marshal(Script{Type: CustomToolCall, Name: "apply_patch", Input: patch})
	do(http.MethodPut, ScriptPath, string(b))
	_, body = do(http.MethodPost, "/v1/responses", first)
	if item := doneItem(t, body); item["type"] != "custom_tool_call" || item["name"] != "apply_patch" || item["input"] != patch {
		t.Errorf("apply_patch call %v", item)
	}
	_, body = do(http.MethodPost, "/v1/responses", `{"input":[{"type":"function_call_output","call_id":"other","output":"x"}]}`)
	if doneItem(t, body)["type"] != "custom_tool_call" || result().Answered {
		t.Errorf("an output for another call must not count")
	}
	do(http.MethodPost, "/v1/responses", `{"input":[{"type":"custom_tool_call_output","call_id":"call_1","output":"Success."}]}`)
	if r := result(); !r.Answered || r.Type != "custom_tool_call_output" || r.Content != "Success." {
		t.Errorf("apply_patch output %+v", r)
	}

	// A verbatim item.
	do(http.MethodPut, ScriptPath, `{"item":{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q"}}}`)
	if _, body := do(http.MethodPost, "/v1/responses", first); doneItem(t, body)["type"] != "web_search_call" {
		t.Errorf("verbatim item: %s", body)
	}

	if code, _ := do(http.MethodPut, ScriptPath, `not json`); code != http.StatusBadRequest {
		t.Errorf("a bad script: %d, want 400", code)
	}
	if code, _ := do(http.MethodPut, ScriptPath, `{"type":"local_shell_call","name":"x"}`); code != http.StatusBadRequest {
		t.Errorf("an unknown call type: %d, want 400", code)
	}
	if code, _ := do(http.MethodGet, "/v1/models", ""); code != http.StatusNotFound {
		t.Errorf("/v1/models: %d, want 404", code)
	}
}

// TestNew arms the stand-in in process, as the conformance suite does.
func TestNew(t *testing.T) {
	s := New("exec_command", map[string]any{"cmd": "ls"})
	srv := httptest.NewServer(s)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(`{"input":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if item := doneItem(t, string(b)); item["arguments"] != `{"cmd":"ls"}` {
		t.Errorf("item %v", item)
	}
	resp, err = http.Post(srv.URL+"/v1/responses", "application/json",
		strings.NewReader(`{"input":[{"type":"function_call_output","call_id":"call_1","output":"ok"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := s.ToolResults(); len(got) != 1 || got[0].Content != "ok" {
		t.Errorf("results %+v", got)
	}
}
