// Package geminitest is a scripted stand-in for the Gemini API (generativelanguage v1beta), enough
// to drive the real Gemini CLI in headless mode (-p) through one tool call: the routing call
// (generateContent, JSON schema with model_choice) is answered "flash"; the first
// streamGenerateContent turn calls the scripted tool with the scripted args; the turn that carries
// the functionResponse ends with text. It records the functionResponses it receives. The CLI is
// pointed at it with GOOGLE_GEMINI_BASE_URL and any GEMINI_API_KEY. Like messagestest, the
// /_standin/ endpoints set the script and read what the model got.
package geminitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Script is the one tool call the model makes: Tool is the function name the CLI declared
// (run_shell_command, write_file, mcp_deploy_release, …) and Input its args.
type Script struct {
	Tool  string         `json:"tool"`
	Input map[string]any `json:"input"`
}

// ToolResult is the last functionResponse the model received: Name is the function, Content the
// JSON of its "response" object. Gemini CLI 0.61.0 answers {"output":…} when the tool ran and
// {"error":…} when it did not, e.g. {"error":"Tool execution blocked: <hook reason>"}; IsError
// says the response carries "error". Answered is false while none arrived.
type ToolResult struct {
	Answered bool   `json:"answered"`
	Name     string `json:"name"`
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

// SetScript replaces the script and forgets the functionResponses received so far.
func (s *Server) SetScript(sc Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script, s.results = sc, nil
}

// ToolResult returns the last functionResponse received under the current script.
func (s *Server) ToolResult() ToolResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.results) == 0 {
		return ToolResult{}
	}
	r := s.results[len(s.results)-1]
	b, _ := json.Marshal(r["response"])
	name, _ := r["name"].(string)
	resp, _ := r["response"].(map[string]any)
	_, isErr := resp["error"]
	return ToolResult{Answered: true, Name: name, Content: string(b), IsError: isErr}
}

// Control paths: PUT a Script to arm the stand-in, GET the ToolResult.
const (
	ScriptPath     = "/_standin/script"
	ToolResultPath = "/_standin/tool-result"
)

// ServeHTTP serves the model endpoints under /v1beta/models/ and the control paths. In a headless
// run Gemini CLI 0.61.0 (API-key auth, usage statistics and telemetry off) was seen to call only
// models/<m>:generateContent (the router; google_web_search, with tools [{googleSearch:{}}]) and
// models/<m>:streamGenerateContent?alt=sse (the turns). countTokens, embedContent and model
// listing get minimal answers, and anything else an empty JSON object.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == ScriptPath && r.Method == http.MethodPut:
		var sc Script
		if err := json.NewDecoder(r.Body).Decode(&sc); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.SetScript(sc)
		w.WriteHeader(http.StatusNoContent)
	case p == ToolResultPath && r.Method == http.MethodGet:
		writeJSON(w, s.ToolResult())
	case strings.HasSuffix(p, ":streamGenerateContent"):
		s.stream(w, r)
	case strings.HasSuffix(p, ":generateContent"):
		s.generate(w, r)
	case strings.HasSuffix(p, ":countTokens"):
		_, _ = io.Copy(io.Discard, r.Body)
		writeJSON(w, map[string]any{"totalTokens": 10})
	case strings.HasSuffix(p, ":embedContent"):
		_, _ = io.Copy(io.Discard, r.Body)
		writeJSON(w, map[string]any{"embedding": map[string]any{"values": []float64{0}}})
	case strings.HasPrefix(p, "/v1beta/models") || strings.HasPrefix(p, "/v1/models"):
		writeJSON(w, map[string]any{"models": []any{}})
	default:
		_, _ = io.Copy(io.Discard, r.Body)
		writeJSON(w, map[string]any{})
	}
}

type request struct {
	Contents []struct {
		Role  string           `json:"role"`
		Parts []map[string]any `json:"parts"`
	} `json:"contents"`
	GenerationConfig struct {
		ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
		ResponseSchema     map[string]any `json:"responseSchema"`
	} `json:"generationConfig"`
}

func decode(r *http.Request) request {
	var req request
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	return req
}

// functionResponses returns the functionResponse parts of the last content.
func (req request) functionResponses() []map[string]any {
	var out []map[string]any
	if n := len(req.Contents); n > 0 {
		for _, part := range req.Contents[n-1].Parts {
			if fr, ok := part["functionResponse"].(map[string]any); ok {
				out = append(out, fr)
			}
		}
	}
	return out
}

// generate answers the CLI's side calls that ask for JSON: the model routers (model_choice of the
// classifier, complexity_score of the numerical classifier), the next-speaker check
// (next_speaker) and anything else with a response schema, whose properties it fills in by type.
// Without a schema it answers text.
func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	req := decode(r)
	schema := req.GenerationConfig.ResponseJSONSchema
	if schema == nil {
		schema = req.GenerationConfig.ResponseSchema
	}
	text := "done"
	if schema != nil {
		obj := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		for k, v := range props {
			typ, _ := v.(map[string]any)["type"].(string)
			switch {
			case k == "model_choice":
				obj[k] = "flash"
			case k == "next_speaker":
				obj[k] = "user"
			case strings.EqualFold(typ, "integer") || strings.EqualFold(typ, "number"):
				obj[k] = 10 // the numerical router's complexity_score (1-100): low, so flash
			case strings.EqualFold(typ, "boolean"):
				obj[k] = false
			case strings.EqualFold(typ, "array"):
				obj[k] = []any{}
			default:
				obj[k] = "stand-in"
			}
		}
		b, _ := json.Marshal(obj)
		text = string(b)
	}
	writeJSON(w, response([]any{map[string]any{"text": text}}))
}

// stream answers a streamGenerateContent turn (alt=sse): the scripted functionCall, or text
// once a functionResponse came back (or when unscripted).
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	results := decode(r).functionResponses()
	s.mu.Lock()
	sc := s.script
	s.results = append(s.results, results...)
	s.mu.Unlock()
	var parts []any
	if len(results) > 0 || sc.Tool == "" {
		parts = []any{map[string]any{"text": "done"}}
	} else {
		args := sc.Input
		if args == nil {
			args = map[string]any{}
		}
		parts = []any{map[string]any{"functionCall": map[string]any{"name": sc.Tool, "args": args}}}
	}
	b, _ := json.Marshal(response(parts))
	if r.URL.Query().Get("alt") == "sse" {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		return
	}
	// Without alt=sse the API streams a JSON array of responses.
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "[%s]", b)
}

func response(parts []any) map[string]any {
	return map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": parts},
			"finishReason": "STOP",
			"index":        0,
		}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
		"modelVersion":  "gemini-2.5-flash",
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
