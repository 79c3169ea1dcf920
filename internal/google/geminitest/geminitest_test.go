package geminitest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStandIn drives the stand-in as Gemini CLI and the conformance suite do: the control path
// arms it, the router's generateContent gets JSON that fits its schema, the first
// streamGenerateContent turn calls the scripted function, the turn carrying the
// functionResponse ends the conversation, and the functionResponse is read back.
func TestStandIn(t *testing.T) {
	srv := httptest.NewServer(&Server{})
	defer srv.Close()
	do := func(method, path, body string) (int, string, string) {
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
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	result := func() ToolResult {
		t.Helper()
		_, _, body := do(http.MethodGet, ToolResultPath, "")
		var r ToolResult
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return r
	}
	// sse returns the parts of the one event of a streamed turn.
	sse := func(body string) []map[string]any {
		t.Helper()
		var parts []map[string]any
		n := 0
		for _, line := range strings.Split(body, "\n") {
			data, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data: ")
			if !ok {
				continue
			}
			n++
			var ev struct {
				Candidates []struct {
					Content struct {
						Role  string           `json:"role"`
						Parts []map[string]any `json:"parts"`
					} `json:"content"`
					FinishReason string `json:"finishReason"`
				} `json:"candidates"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("%s: %v", data, err)
			}
			if len(ev.Candidates) != 1 || ev.Candidates[0].Content.Role != "model" || ev.Candidates[0].FinishReason != "STOP" {
				t.Fatalf("event %s", data)
			}
			parts = ev.Candidates[0].Content.Parts
		}
		if n != 1 {
			t.Fatalf("want one SSE event, got %d in %q", n, body)
		}
		return parts
	}
	// text returns the text of the one part of a generateContent answer.
	text := func(body string) string {
		t.Helper()
		var resp struct {
			Candidates []struct {
				Content struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"content"`
			} `json:"candidates"`
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil || len(resp.Candidates) != 1 || len(resp.Candidates[0].Content.Parts) != 1 {
			t.Fatalf("generateContent answered %s (%v)", body, err)
		}
		return resp.Candidates[0].Content.Parts[0].Text
	}
	const stream = "/v1beta/models/gemini-3.8-flash:streamGenerateContent?alt=sse"

	// The routers: the numerical classifier (as 0.61.0 sends it) and the older model_choice one.
	numerical := `{"contents":[{"role":"user","parts":[{"text":"do the task"}]}],"generationConfig":{"responseMimeType":"application/json",` +
		`"responseJsonSchema":{"type":"OBJECT","properties":{"complexity_reasoning":{"type":"STRING"},"complexity_score":{"type":"INTEGER"}},"required":["complexity_reasoning","complexity_score"]}}}`
	_, _, body := do(http.MethodPost, "/v1beta/models/gemini-3.5-flash-lite:generateContent", numerical)
	var route map[string]any
	if err := json.Unmarshal([]byte(text(body)), &route); err != nil || route["complexity_score"] != float64(10) || route["complexity_reasoning"] == nil {
		t.Errorf("numerical router got %q (%v)", text(body), err)
	}
	classifier := `{"contents":[],"generationConfig":{"responseJsonSchema":{"type":"object","properties":{"reasoning":{"type":"string"},"model_choice":{"type":"string","enum":["flash","pro"]}}}}}`
	_, _, body = do(http.MethodPost, "/v1beta/models/gemini-2.5-flash-lite:generateContent", classifier)
	if err := json.Unmarshal([]byte(text(body)), &route); err != nil || route["model_choice"] != "flash" {
		t.Errorf("classifier router got %q (%v)", text(body), err)
	}
	// Without a schema (google_web_search's call) it answers text.
	_, _, body = do(http.MethodPost, "/v1beta/models/gemini-3-flash-preview:generateContent", `{"contents":[{"role":"user","parts":[{"text":"q"}]}],"tools":[{"googleSearch":{}}]}`)
	if got := text(body); got != "done" {
		t.Errorf("plain generateContent: %q", got)
	}

	// Unscripted, a turn ends with text.
	_, ctype, body := do(http.MethodPost, stream, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	if ctype != "text/event-stream" {
		t.Errorf("Content-Type %q", ctype)
	}
	if parts := sse(body); len(parts) != 1 || parts[0]["text"] != "done" {
		t.Errorf("unscripted, the stand-in must answer with text; got %s", body)
	}

	if code, _, _ := do(http.MethodPut, ScriptPath, `{"tool":"run_shell_command","input":{"command":"touch /workspace/x"}}`); code != http.StatusNoContent {
		t.Fatalf("PUT %s: %d", ScriptPath, code)
	}
	_, _, body = do(http.MethodPost, stream, `{"contents":[{"role":"user","parts":[{"text":"do the task"}]}],"tools":[{"functionDeclarations":[]}]}`)
	parts := sse(body)
	if len(parts) != 1 {
		t.Fatalf("the first turn must make one call; got %s", body)
	}
	call, _ := parts[0]["functionCall"].(map[string]any)
	if b, _ := json.Marshal(call); string(b) != `{"args":{"command":"touch /workspace/x"},"name":"run_shell_command"}` {
		t.Errorf("functionCall %s", b)
	}
	if r := result(); r.Answered {
		t.Errorf("no functionResponse yet, got %+v", r)
	}

	// The turn that carries the functionResponse (as the CLI sends a hook's deny) ends with text.
	answer := `{"contents":[{"role":"user","parts":[{"text":"do the task"}]},` +
		`{"role":"model","parts":[{"functionCall":{"id":"run_shell_command_1_0","name":"run_shell_command","args":{"command":"touch /workspace/x"}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"id":"run_shell_command_1_0","name":"run_shell_command","response":{"error":"Tool execution blocked: BLOCKED"}}}]}]}`
	_, _, body = do(http.MethodPost, stream, answer)
	if parts := sse(body); len(parts) != 1 || parts[0]["text"] != "done" {
		t.Errorf("the turn carrying the functionResponse must end the conversation; got %s", body)
	}
	if r := result(); !r.Answered || !r.IsError || r.Name != "run_shell_command" || r.Content != `{"error":"Tool execution blocked: BLOCKED"}` {
		t.Errorf("tool result %+v", r)
	}
	ran := strings.Replace(answer, `{"error":"Tool execution blocked: BLOCKED"}`, `{"output":"ok"}`, 1)
	do(http.MethodPost, stream, ran)
	if r := result(); !r.Answered || r.IsError || r.Content != `{"output":"ok"}` {
		t.Errorf("tool result after a run %+v", r)
	}

	// Without alt=sse the stream is a JSON array.
	_, _, body = do(http.MethodPost, strings.TrimSuffix(stream, "?alt=sse"), `{"contents":[]}`)
	var arr []any
	if err := json.Unmarshal([]byte(body), &arr); err != nil || len(arr) != 1 {
		t.Errorf("streamGenerateContent without alt=sse: %s (%v)", body, err)
	}
	// Side endpoints answer minimally.
	if code, _, body := do(http.MethodPost, "/v1beta/models/gemini-3.8-flash:countTokens", "{}"); code != http.StatusOK || !strings.Contains(body, `"totalTokens"`) {
		t.Errorf("countTokens: %d %s", code, body)
	}
	if code, _, body := do(http.MethodPost, "/v1internal:loadCodeAssist", "{}"); code != http.StatusOK || strings.TrimSpace(body) != "{}" {
		t.Errorf("another endpoint: %d %s", code, body)
	}

	// A new script forgets the old results.
	do(http.MethodPut, ScriptPath, `{"tool":"write_file","input":{}}`)
	if r := result(); r.Answered {
		t.Errorf("after a new script: %+v", r)
	}
	if code, _, _ := do(http.MethodPut, ScriptPath, `not json`); code != http.StatusBadRequest {
		t.Errorf("a bad script: %d, want 400", code)
	}
}

// TestNew arms the stand-in in process, without the control path.
func TestNew(t *testing.T) {
	s := New("mcp_deploy_release", map[string]any{"service": "api"})
	srv := httptest.NewServer(s)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1beta/models/m:streamGenerateContent?alt=sse", "application/json", strings.NewReader(`{"contents":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"functionCall":{"args":{"service":"api"},"name":"mcp_deploy_release"}`) {
		t.Errorf("got %s", b)
	}
	if s.ToolResult().Answered {
		t.Error("answered before any functionResponse")
	}
}
