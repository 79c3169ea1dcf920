// Package responsestest is a scripted stand-in for the OpenAI Responses API, enough to drive the
// real Codex CLI (codex exec) through one tool call: the first turn calls the scripted tool; the
// turn whose input carries that call's output ends with a text message. It records the tool
// outputs it receives. It is the Codex counterpart of messagestest and has the same /_standin/
// control paths, so it can run in process or as a pod.
//
// Codex 0.171.0 offers its tools in two item shapes, both covered by Script:
//   - a function_call (Type "" or "function_call"): Name and JSON Arguments, e.g. exec_command
//     {"cmd": "..."} for the shell and mcp__<server>__<tool> for MCP tools;
//   - a custom_tool_call (Type "custom_tool_call"): Name and free-form Input, e.g. apply_patch
//     with the patch text.
//
// Item sends any other output item verbatim, e.g. a hosted web_search_call, which Codex does not
// run itself and answers with no output.
package responsestest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Item types of a scripted call.
const (
	FunctionCall   = "function_call"
	CustomToolCall = "custom_tool_call"
)

// CallID is the call_id of the scripted call; Codex hands it to hooks as tool_use_id.
const CallID = "call_1"

// Script is the one tool call the model makes. Type is FunctionCall (the default when empty) or
// CustomToolCall. A function_call carries Arguments (sent JSON-encoded as a string, as the API
// does); a custom_tool_call carries Input verbatim. Namespace, when set, is sent as the
// function_call's namespace. Item, when set, is sent verbatim instead and the other fields are
// ignored. An empty Name with no Item makes every turn answer with text.
type Script struct {
	Type      string         `json:"type,omitempty"`
	Name      string         `json:"name"`
	Namespace string         `json:"namespace,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Input     string         `json:"input,omitempty"`
	Item      map[string]any `json:"item,omitempty"`
}

// ToolResult is the last output the model received for the scripted call: Type is the item type
// (function_call_output or custom_tool_call_output); Content is the output as text when Codex sent
// a string, otherwise its JSON. Answered is false while none arrived.
type ToolResult struct {
	Answered bool   `json:"answered"`
	Type     string `json:"type,omitempty"`
	Content  string `json:"content"`
}

// Server is the stand-in. Its zero value answers every turn with text; SetScript arms it.
type Server struct {
	mu      sync.Mutex
	script  Script
	results []ToolResult
}

// New returns a stand-in scripted to make the function_call name with arguments.
func New(name string, arguments map[string]any) *Server {
	s := &Server{}
	s.SetScript(Script{Name: name, Arguments: arguments})
	return s
}

// SetScript replaces the script and forgets the tool outputs received so far.
func (s *Server) SetScript(sc Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script, s.results = sc, nil
}

// ToolResult returns the last tool output received under the current script.
func (s *Server) ToolResult() ToolResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.results) == 0 {
		return ToolResult{}
	}
	return s.results[len(s.results)-1]
}

// ToolResults returns every tool output received under the current script, oldest first.
func (s *Server) ToolResults() []ToolResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ToolResult(nil), s.results...)
}

// Control paths: PUT a Script to arm the stand-in, GET the ToolResult.
const (
	ScriptPath     = "/_standin/script"
	ToolResultPath = "/_standin/tool-result"
)

// ServeHTTP serves the Responses API (POST /v1/responses, streaming) and the control paths.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == ScriptPath && r.Method == http.MethodPut:
		var sc Script
		if err := json.NewDecoder(r.Body).Decode(&sc); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if sc.Type != "" && sc.Type != FunctionCall && sc.Type != CustomToolCall {
			http.Error(w, "unknown call type "+sc.Type, http.StatusBadRequest)
			return
		}
		s.SetScript(sc)
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == ToolResultPath && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.ToolResult())
	case strings.HasSuffix(r.URL.Path, "/responses") && r.Method == http.MethodPost:
		s.responses(w, r)
	default:
		http.NotFound(w, r)
	}
}

// outputs returns the outputs for CallID in a request's input, in order.
func outputs(input []map[string]any) []ToolResult {
	var out []ToolResult
	for _, it := range input {
		typ, _ := it["type"].(string)
		if !strings.HasSuffix(typ, "_call_output") || it["call_id"] != CallID {
			continue
		}
		content, ok := it["output"].(string)
		if !ok {
			b, _ := json.Marshal(it["output"])
			content = string(b)
		}
		out = append(out, ToolResult{Answered: true, Type: typ, Content: content})
	}
	return out
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string           `json:"model"`
		Input []map[string]any `json:"input"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	got := outputs(req.Input)
	s.mu.Lock()
	sc := s.script
	if len(got) > 0 {
		// Codex resends the whole conversation each turn; keep the outputs of the latest request.
		s.results = got
	}
	s.mu.Unlock()

	var item map[string]any
	switch {
	case len(got) > 0 || (sc.Name == "" && sc.Item == nil):
		item = textItem()
	case sc.Item != nil:
		item = sc.Item
	case sc.Type == CustomToolCall:
		item = map[string]any{"type": CustomToolCall, "id": "ctc_1", "status": "completed", "call_id": CallID,
			"name": sc.Name, "input": sc.Input}
	default:
		args, _ := json.Marshal(sc.Arguments)
		if sc.Arguments == nil {
			args = []byte("{}")
		}
		item = map[string]any{"type": FunctionCall, "id": "fc_1", "status": "completed", "call_id": CallID,
			"name": sc.Name, "arguments": string(args)}
		if sc.Namespace != "" {
			item["namespace"] = sc.Namespace
		}
	}
	model := req.Model
	if model == "" {
		model = "gpt-5"
	}
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	ev := func(name string, data map[string]any) {
		data["type"], data["sequence_number"] = name, seq
		seq++
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	resp := func(status string) map[string]any {
		m := map[string]any{"id": "resp_1", "object": "response", "model": model, "status": status, "output": []any{}}
		if status == "completed" {
			m["output"] = []any{item}
			m["usage"] = map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
				"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}
		}
		return m
	}
	ev("response.created", map[string]any{"response": resp("in_progress")})
	ev("response.output_item.added", map[string]any{"output_index": 0, "item": item})
	if item["type"] == "message" {
		ev("response.output_text.delta", map[string]any{"output_index": 0, "content_index": 0, "item_id": "msg_1", "delta": "done"})
	}
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	ev("response.completed", map[string]any{"response": resp("completed")})
}

func textItem() map[string]any {
	return map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": "done", "annotations": []any{}}}}
}
