// Package messagestest is a scripted stand-in for the Anthropic Messages API, enough to drive the
// real Claude Code in print mode through one tool call: the first turn calls the scripted tool
// with the scripted input; the turn that carries the tool_result ends with a text block. It
// records the tool_results it receives. The conformance suite serves it in process next to
// Claude Code on the host, and as a pod (hack/testbed messages) for Claude Code in a sandbox
// pod, where the /_standin/ endpoints set the script and read what the model got.
package messagestest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Script is the one tool call the model makes.
type Script struct {
	Tool  string         `json:"tool"`
	Input map[string]any `json:"input"`
}

// ToolResult is the last tool_result the model received: its content as JSON and is_error.
// Answered is false while none arrived.
type ToolResult struct {
	Answered bool   `json:"answered"`
	Content  string `json:"content"`
	IsError  bool   `json:"isError"`
}

// Server is the stand-in. Its zero value answers every turn with text; SetScript arms it.
type Server struct {
	mu      sync.Mutex
	script  Script
	results []map[string]any
}

// New returns a stand-in scripted to call tool with input.
func New(tool string, input map[string]any) *Server {
	s := &Server{}
	s.SetScript(Script{Tool: tool, Input: input})
	return s
}

// SetScript replaces the script and forgets the tool_results received so far.
func (s *Server) SetScript(sc Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script, s.results = sc, nil
}

// ToolResult returns the last tool_result received under the current script.
func (s *Server) ToolResult() ToolResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.results) == 0 {
		return ToolResult{}
	}
	r := s.results[len(s.results)-1]
	b, _ := json.Marshal(r["content"])
	isErr, _ := r["is_error"].(bool)
	return ToolResult{Answered: true, Content: string(b), IsError: isErr}
}

// Control paths: PUT a Script to arm the stand-in, GET the ToolResult.
const (
	ScriptPath     = "/_standin/script"
	ToolResultPath = "/_standin/tool-result"
)

// ServeHTTP serves the Messages API (POST /v1/messages, streaming) and the control paths.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == ScriptPath && r.Method == http.MethodPut:
		var sc Script
		if err := json.NewDecoder(r.Body).Decode(&sc); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.SetScript(sc)
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == ToolResultPath && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.ToolResult())
	case strings.HasPrefix(r.URL.Path, "/v1/messages") && !strings.Contains(r.URL.Path, "count_tokens"):
		s.messages(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	var result map[string]any
	if n := len(req.Messages); n > 0 {
		if blocks, ok := req.Messages[n-1].Content.([]any); ok {
			for _, b := range blocks {
				if bm, ok := b.(map[string]any); ok && bm["type"] == "tool_result" {
					result = bm
				}
			}
		}
	}
	s.mu.Lock()
	sc := s.script
	if result != nil {
		s.results = append(s.results, result)
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(name, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data) }
	ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)
	if result != nil || sc.Tool == "" {
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"done"}}`)
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`)
	} else {
		input, _ := json.Marshal(sc.Input)
		partial, _ := json.Marshal(string(input))
		ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01GATE","name":%q,"input":{}}}`, sc.Tool))
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`+string(partial)+`}}`)
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}`)
	}
	ev("message_stop", `{"type":"message_stop"}`)
}
