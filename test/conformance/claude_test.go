//go:build conformance

package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/testutil"
)

const claudePkg = "@anthropic-ai/claude-agent-sdk"

// messagesStandIn is a scripted Messages API: the first turn calls one tool with one input;
// the turn that carries the tool_result ends with a text block. It records the tool_results.
type messagesStandIn struct {
	tool  string
	input map[string]any

	mu      sync.Mutex
	results []map[string]any
}

func (m *messagesStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/v1/messages") || strings.Contains(r.URL.Path, "count_tokens") {
		http.NotFound(w, r)
		return
	}
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
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(name, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data) }
	ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)
	if result != nil {
		m.mu.Lock()
		m.results = append(m.results, result)
		m.mu.Unlock()
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"done"}}`)
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`)
	} else {
		input, _ := json.Marshal(m.input)
		partial, _ := json.Marshal(string(input))
		ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01GATE","name":%q,"input":{}}}`, m.tool))
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`+string(partial)+`}}`)
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}`)
	}
	ev("message_stop", `{"type":"message_stop"}`)
}

func (m *messagesStandIn) toolResult() (content string, isError bool, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.results) == 0 {
		return "", false, false
	}
	r := m.results[len(m.results)-1]
	b, _ := json.Marshal(r["content"])
	isErr, _ := r["is_error"].(bool)
	return string(b), isErr, true
}

// bundle renders the sample policy's bootstrap bundle into hooksDir, as the ConfigMap volume
// would hold it, with the mount directory set to hooksDir.
func bundle(t *testing.T, hooksDir, hookBin string) {
	t.Helper()
	p := harnessSamplePolicy(t)
	p.Namespace, p.Generation = "agents", 1
	res, err := bootstrap.Build(p, bootstrap.Published{}, bootstrap.Options{MountDir: hooksDir, HookBin: hookBin})
	if err != nil || res.HeldBack() {
		t.Fatalf("the sample policy's bundle: %v %v %v", err, res.CompileErrs, res.RenderErr)
	}
	for k, v := range res.Bundle.Data {
		if err := os.WriteFile(filepath.Join(hooksDir, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type claudeRun struct {
	out     map[string]any
	stderr  string
	denials []string
}

// runClaude runs the real Claude Code in print mode against the stand-in, inside a private
// mount namespace whose /etc/claude-code is a bind mount of managedDir. Nothing is written
// to the host's /etc but an empty mount point.
func runClaude(t *testing.T, standIn *messagesStandIn, managedDir, work, home string, extra ...string) claudeRun {
	t.Helper()
	return runClaudeWithShell(t, standIn, managedDir, work, home, "", extra...)
}

// runClaudeWithShell is runClaude with /bin/sh replaced, inside the mount namespace only, by
// shell (a path such as /bin/bash), as on distributions whose /bin/sh is bash; "" keeps it.
func runClaudeWithShell(t *testing.T, standIn *messagesStandIn, managedDir, work, home, shell string, extra ...string) claudeRun {
	t.Helper()
	srv := httptest.NewServer(standIn)
	defer srv.Close()
	claude, err := filepath.Abs(filepath.Join("node_modules", "@anthropic-ai", "claude-agent-sdk-linux-x64", "claude"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("/etc/claude-code", 0o755); err != nil {
		t.Fatalf("creating the mount point: %v", err)
	}
	args := append([]string{"-p", "do the task", "--output-format", "json"}, extra...)
	script := `mount --bind "$1" /etc/claude-code && shift && exec "$@"`
	if shell != "" {
		// /bin/sh may be a symlink (to dash): the bind mount lands on its target, in this
		// namespace only.
		script = `mount --bind "$1" /etc/claude-code && mount --bind ` + shell + ` "$(readlink -f /bin/sh)" && shift && exec "$@"`
	}
	cmd := exec.Command("unshare", append([]string{"-m", "--propagation", "private", "sh", "-c", script, "sh", managedDir, claude}, args...)...)
	cmd.Dir = work
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=sk-ant-conformance",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Logf("claude exited: %v\n%s", err, stderr.String())
	}
	r := claudeRun{stderr: stderr.String()}
	if err := json.Unmarshal(stdout.Bytes(), &r.out); err != nil {
		t.Fatalf("claude's JSON output: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if ds, ok := r.out["permission_denials"].([]any); ok {
		for _, d := range ds {
			if dm, ok := d.(map[string]any); ok {
				r.denials = append(r.denials, fmt.Sprint(dm["tool_name"]))
			}
		}
	}
	return r
}

const refusal = "[Intutic Governance] BLOCKED: "

type check func(t *testing.T, r claudeRun, s *messagesStandIn, marker string) (bool, string)

// blockedWith passes when the model got the gate's refusal with reason and the command did
// not run.
func blockedWith(reason string) check {
	return func(t *testing.T, r claudeRun, s *messagesStandIn, marker string) (bool, string) {
		content, isErr, ok := s.toolResult()
		_, statErr := os.Stat(marker)
		switch {
		case !ok:
			return false, "the model never received a tool_result"
		case !isErr || !strings.Contains(content, refusal+reason):
			return false, fmt.Sprintf("tool_result is_error=%v content %s", isErr, content)
		case statErr == nil:
			return false, "the blocked command ran: the marker exists"
		}
		return true, ""
	}
}

func buildHook(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the Claude Code cases need root, for a private mount namespace (unshare -m)")
	}
	hookBin := filepath.Join(t.TempDir(), "gate-hook")
	if out, err := testutil.Run(t, "", "go", "build", "-o", hookBin, "../../cmd/gate-hook"); err != nil {
		t.Fatalf("building gate-hook: %v\n%s", err, out)
	}
	return hookBin
}

func TestClaudeCode(t *testing.T) {
	hookBin := buildHook(t)
	cases := []struct {
		name     string
		tool     string
		input    func(marker string) map[string]any
		extra    []string
		mcp      bool // configure the offline MCP server "deploy"
		snapshot func(hooksDir string) error
		check    check
	}{
		{name: "a blocked Bash command is refused and does not run", tool: "Bash",
			input: func(m string) map[string]any {
				return map[string]any{"command": "rm -rf /nonexistent-gate-conformance; touch " + m}
			},
			extra: []string{"--allowedTools", "Bash"},
			check: blockedWith("destructive command on the root filesystem")},
		{name: "an allowed Bash command runs", tool: "Bash",
			input: func(m string) map[string]any { return map[string]any{"command": "touch " + m} },
			extra: []string{"--allowedTools", "Bash"},
			check: func(t *testing.T, r claudeRun, s *messagesStandIn, marker string) (bool, string) {
				if _, err := os.Stat(marker); err != nil {
					return false, "the allowed command did not run"
				}
				return true, ""
			}},
		{name: "an Ask rule hands the call to Claude's own permission flow", tool: "WebFetch",
			input: func(string) map[string]any {
				return map[string]any{"url": "https://docs.example.org/guide", "prompt": "summarise"}
			},
			extra: []string{"--allowedTools", "WebFetch"},
			check: func(t *testing.T, r claudeRun, s *messagesStandIn, marker string) (bool, string) {
				content, _, _ := s.toolResult()
				if strings.Contains(content, refusal) {
					return false, "the gate refused instead of asking: " + content
				}
				if len(r.denials) == 0 || r.denials[0] != "WebFetch" {
					return false, fmt.Sprintf("print mode has nobody to ask, so Claude's flow must deny it; denials %v, result %s", r.denials, content)
				}
				return true, ""
			}},
		{name: "a Write outside the workspace is refused", tool: "Write",
			input: func(m string) map[string]any { return map[string]any{"file_path": m, "content": "x"} },
			extra: []string{"--allowedTools", "Write"},
			check: blockedWith("agents write only inside /workspace")},
		{name: "a WebFetch to a forbidden host is refused", tool: "WebFetch",
			input: func(string) map[string]any {
				return map[string]any{"url": "https://pastebin.example/raw/x", "prompt": "read"}
			},
			extra: []string{"--allowedTools", "WebFetch"},
			check: blockedWith("paste sites are a known exfiltration channel")},
		{name: "an MCP tool (mcp__deploy__release) to production is refused", tool: "mcp__deploy__release",
			input: func(string) map[string]any { return map[string]any{"service": "api", "environment": "production"} },
			mcp:   true,
			extra: []string{"--allowedTools", "mcp__deploy__release"},
			check: blockedWith("production deploys go through the release pipeline")},
		{name: "an MCP tool (mcp__deploy__release) to staging runs", tool: "mcp__deploy__release",
			input: func(string) map[string]any { return map[string]any{"service": "api", "environment": "staging"} },
			mcp:   true,
			extra: []string{"--allowedTools", "mcp__deploy__release"},
			check: func(t *testing.T, r claudeRun, s *messagesStandIn, marker string) (bool, string) {
				if _, err := os.Stat(marker); err != nil {
					content, _, _ := s.toolResult()
					return false, "the allowed MCP call did not reach the server: " + content
				}
				return true, ""
			}},
		{name: "a missing snapshot blocks", tool: "Bash",
			input:    func(m string) map[string]any { return map[string]any{"command": "touch " + m} },
			extra:    []string{"--allowedTools", "Bash"},
			snapshot: func(d string) error { return os.Remove(filepath.Join(d, gate.SnapshotFileName)) },
			check:    blockedWith("no policy snapshot at ")},
		{name: "a corrupt snapshot blocks", tool: "Bash",
			input: func(m string) map[string]any { return map[string]any{"command": "touch " + m} },
			extra: []string{"--allowedTools", "Bash"},
			snapshot: func(d string) error {
				return os.WriteFile(filepath.Join(d, gate.SnapshotFileName), []byte(`{"apiVersion":`), 0o644)
			},
			check: blockedWith("the policy snapshot is not valid JSON")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hooks, managed, work := t.TempDir(), t.TempDir(), t.TempDir()
			bundle(t, hooks, hookBin)
			if tc.snapshot != nil {
				if err := tc.snapshot(hooks); err != nil {
					t.Fatal(err)
				}
			}
			settings, err := os.ReadFile(filepath.Join(hooks, bootstrap.KeyManagedSettings))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(managed, bootstrap.KeyManagedSettings), settings, 0o644); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(t.TempDir(), "marker")
			s := &messagesStandIn{tool: tc.tool, input: tc.input(marker)}
			extra := tc.extra
			if tc.mcp {
				server, _ := filepath.Abs("mcp-server.mjs")
				cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"deploy": map[string]any{
					"type": "stdio", "command": "node", "args": []string{server}, "env": map[string]string{"MARKER": marker},
				}}})
				cfgPath := filepath.Join(work, "mcp.json")
				if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
					t.Fatal(err)
				}
				extra = append(extra, "--mcp-config", cfgPath, "--strict-mcp-config")
			}
			r := runClaude(t, s, managed, work, t.TempDir(), extra...)
			ok, detail := tc.check(t, r, s, marker)
			record(t, claudePkg, tc.name, ok, detail)
		})
	}
}
