package main

// These tests build the real gate-hook binary and run it the way Claude Code does: the hook
// JSON on stdin, the answer read from stdout, stderr and the exit status.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/claudecode"
)

// hookBin is gate-hook as the images ship it: built without CEL, with gate-hook-cel beside it
// (celBin), so every test below goes through both and through the hand-off between them.
var hookBin, celBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gate-hook-test-")
	if err != nil {
		panic(err)
	}
	hookBin, celBin = filepath.Join(dir, "gate-hook"), filepath.Join(dir, celHook)
	for _, b := range []struct{ out, tags string }{{hookBin, "nocel"}, {celBin, ""}} {
		build := exec.Command("go", "build", "-tags", b.tags, "-o", b.out, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			os.Stderr.Write(out)
			panic(err)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// secret is in tool inputs; it must never appear in anything the hook prints.
const secret = "sk-ant-SECRET-0123456789"

func policyRules() []gate.Rule {
	return []gate.Rule{
		{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.matches("rm\\s+-rf\\s+/")`, Action: gate.Block, Reason: "destructive command on the root filesystem", Code: "destructive_command"},
		{Name: "no-env-files", Tools: []string{"read", "write", "edit", "multi_edit"}, When: `input.file_path.endsWith(".env")`, Action: gate.Block, Reason: "env files hold credentials"},
		{Name: "globs-stay-home", Tools: []string{"glob", "grep"}, When: `has(input.path) && input.path.startsWith("/etc")`, Action: gate.Block, Reason: "no searching /etc"},
		{Name: "fetch-needs-human", Tools: []string{"web_fetch"}, When: `!input.url.startsWith("https://github.com/")`, Action: gate.Ask, Reason: "fetching from outside github.com needs a human"},
		{Name: "no-exfil-search", Tools: []string{"web_search"}, When: `input.query.contains("password")`, Action: gate.Block, Reason: "no searching for passwords"},
		{Name: "notebooks-ask", Tools: []string{"notebook_edit"}, When: `input.edit_mode == "delete"`, Action: gate.Ask, Reason: "deleting cells needs a human"},
		{Name: "no-big-todo", Tools: []string{"todo_write"}, When: `size(input.todos) > 2`, Action: gate.Block, Reason: "too many todos"},
		{Name: "subagents-ask", Tools: []string{"agent", "task"}, When: `has(input.isolation) && input.isolation == "remote"`, Action: gate.Ask, Reason: "remote subagents need a human"},
		{Name: "no-task-stop", Tools: []string{"task_stop"}, Action: gate.Block, Reason: "tasks are not stopped by agents"},
		{Name: "no-prod-deploys", Tools: []string{"mcp__deploy__*"}, When: `has(input.environment) && input.environment == "production"`, Action: gate.Block, Reason: "production deploys go through the release pipeline", Code: "production_deploy"},
	}
}

func writeSnapshot(t *testing.T, workspace string) string {
	t.Helper()
	return writeSnapshotOf(t, gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1, WorkspaceID: workspace})
}

func writeSnapshotOf(t *testing.T, meta gate.PolicyMeta) string {
	t.Helper()
	s, err := gate.BuildSnapshot(meta, policyRules())
	if err != nil {
		t.Fatal(err)
	}
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), gate.SnapshotFileName)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// payload is a PreToolUse stdin as Claude Code 2.1.332 writes it.
func payload(tool string, input any, extra map[string]any) []byte {
	p := map[string]any{
		"session_id":      "9b2c1f0e-4d1a-4a57-8f0e-1c2d3e4f5a6b",
		"transcript_path": "/home/agent/.claude/projects/-workspace/9b2c1f0e.jsonl",
		"cwd":             "/workspace",
		"prompt_id":       "p_1",
		"permission_mode": "default",
		"effort":          map[string]any{"level": "medium"},
		"hook_event_name": "PreToolUse",
		"tool_name":       tool,
		"tool_input":      input,
		"tool_use_id":     "toolu_01ABCDEF",
	}
	for k, v := range extra {
		p[k] = v
	}
	b, _ := json.Marshal(p)
	return append(b, '\n')
}

type result struct {
	stdout, stderr string
	exit           int
}

// execBinary runs bin with args and stdin, in env (this process's environment when nil), and
// returns what it printed and its exit status.
func execBinary(t *testing.T, bin string, stdin []byte, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	exit := 0
	if ee, ok := err.(*exec.ExitError); ok {
		exit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{stdout.String(), stderr.String(), exit}
}

func runHook(t *testing.T, stdin []byte, env []string, args ...string) result {
	t.Helper()
	r := execBinary(t, hookBin, stdin, append([]string{"PATH=" + os.Getenv("PATH")}, env...), args...)
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Fatalf("the hook printed the tool input: %+v", r)
	}
	return r
}

func decision(t *testing.T, stdout string) claudecode.HookSpecificOutput {
	t.Helper()
	var out claudecode.HookOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("stdout is not hook JSON: %q: %v", stdout, err)
	}
	if out.HookSpecificOutput.HookEventName != "PreToolUse" {
		t.Fatalf("hookEventName = %q", out.HookSpecificOutput.HookEventName)
	}
	return out.HookSpecificOutput
}

func TestToolInputShapes(t *testing.T) {
	snap := writeSnapshot(t, "")
	allow, ask, block := "allow", "ask", "deny"
	cases := []struct {
		name   string
		tool   string
		input  any
		extra  map[string]any
		want   string
		reason string
	}{
		{"Bash allowed", "Bash", map[string]any{"command": "go test ./... # " + secret, "timeout": 120000, "description": "Run tests", "run_in_background": false}, nil, allow, ""},
		{"Bash blocked", "Bash", map[string]any{"command": "rm -rf / --no-preserve-root " + secret, "dangerouslyDisableSandbox": true}, nil, block, "destructive command on the root filesystem"},
		{"Read allowed", "Read", map[string]any{"file_path": "/workspace/main.go", "offset": 1, "limit": 200}, nil, allow, ""},
		{"Read blocked", "Read", map[string]any{"file_path": "/workspace/.env", "pages": "1-2"}, nil, block, "env files hold credentials"},
		{"Write blocked", "Write", map[string]any{"file_path": "/workspace/prod.env", "content": "KEY=" + secret}, nil, block, "env files hold credentials"},
		{"Edit allowed", "Edit", map[string]any{"file_path": "/workspace/a.go", "old_string": "a", "new_string": secret, "replace_all": true}, nil, allow, ""},
		{"MultiEdit blocked (legacy CLIs)", "MultiEdit", map[string]any{"file_path": "/workspace/.env", "edits": []any{map[string]any{"old_string": "a", "new_string": "b"}}}, nil, block, "env files hold credentials"},
		{"Glob blocked", "Glob", map[string]any{"pattern": "**/*.conf", "path": "/etc"}, nil, block, "no searching /etc"},
		{"Grep allowed", "Grep", map[string]any{"pattern": "TODO", "path": "/workspace", "glob": "*.go", "output_mode": "content", "-A": 2, "-n": true, "-i": true, "multiline": false}, nil, allow, ""},
		{"WebFetch to GitHub allowed", "WebFetch", map[string]any{"url": "https://github.com/org/repo", "prompt": "summarise"}, nil, allow, ""},
		{"WebFetch elsewhere asks", "WebFetch", map[string]any{"url": "https://paste.example/raw", "prompt": "read " + secret}, nil, ask, "fetching from outside github.com needs a human"},
		{"WebSearch blocked", "WebSearch", map[string]any{"query": "admin password list", "allowed_domains": []any{"example.com"}}, nil, block, "no searching for passwords"},
		{"NotebookEdit asks", "NotebookEdit", map[string]any{"notebook_path": "/w/a.ipynb", "new_source": "", "cell_id": "c1", "cell_type": "code", "edit_mode": "delete"}, nil, ask, "deleting cells needs a human"},
		{"TodoWrite blocked", "TodoWrite", map[string]any{"todos": []any{
			map[string]any{"content": "a", "status": "pending", "activeForm": "doing a"},
			map[string]any{"content": "b", "status": "in_progress", "activeForm": "doing b"},
			map[string]any{"content": "c", "status": "completed", "activeForm": "doing c"},
		}}, nil, block, "too many todos"},
		{"Agent remote asks", "Agent", map[string]any{"description": "d", "prompt": "p", "subagent_type": "general-purpose", "isolation": "remote"}, nil, ask, "remote subagents need a human"},
		{"Task (old name) remote asks", "Task", map[string]any{"description": "d", "prompt": "p", "isolation": "remote"}, nil, ask, "remote subagents need a human"},
		{"TaskStop blocked", "TaskStop", map[string]any{"task_id": "t1"}, nil, block, "tasks are not stopped by agents"},
		{"MCP tool blocked", "mcp__deploy__run", map[string]any{"service": "api", "environment": "production", "token": secret}, map[string]any{"mcp_server": map[string]any{"name": "deploy", "source": "project"}}, block, "production deploys go through the release pipeline"},
		{"MCP tool allowed", "mcp__deploy__run", map[string]any{"service": "api", "environment": "staging"}, nil, allow, ""},
		{"unknown tool allowed by default", "SomeNewTool", map[string]any{"x": 1}, nil, allow, ""},
		{"string tool_input parsed", "Bash", `{"command":"rm -rf /"}`, nil, block, "destructive command on the root filesystem"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runHook(t, payload(tc.tool, tc.input, tc.extra), nil, "--snapshot", snap)
			switch tc.want {
			case allow:
				if r.exit != 0 || r.stdout != "" || r.stderr != "" {
					t.Fatalf("Allow must exit 0 with no output, got %+v", r)
				}
			case ask:
				d := decision(t, r.stdout)
				if r.exit != 0 || d.PermissionDecision != "ask" || d.PermissionDecisionReason != tc.reason {
					t.Fatalf("want ask %q with exit 0, got %+v", tc.reason, r)
				}
			case block:
				msg := "[Intutic Governance] BLOCKED: " + tc.reason
				d := decision(t, r.stdout)
				if r.exit != 2 || d.PermissionDecision != "deny" || d.PermissionDecisionReason != msg || r.stderr != msg+"\n" {
					t.Fatalf("want deny %q on stdout and stderr with exit 2, got %+v", msg, r)
				}
			}
		})
	}
}

func TestFailuresBlock(t *testing.T) {
	snap := writeSnapshot(t, "ws_123")
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.rules")
	if err := os.WriteFile(corrupt, []byte(`{"apiVersion":`), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.rules")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	good := payload("Bash", map[string]any{"command": "ls " + secret}, nil)
	oversized := payload("Write", map[string]any{"file_path": "/w/big", "content": strings.Repeat("a", claudecode.MaxHookInput) + secret}, nil)

	cases := []struct {
		name   string
		stdin  []byte
		env    []string
		args   []string
		prefix string
	}{
		{"snapshot absent", good, nil, []string{"--snapshot", filepath.Join(dir, "absent.rules")}, "[Intutic Governance] BLOCKED: no policy snapshot at "},
		{"snapshot empty", good, nil, []string{"--snapshot", empty}, "[Intutic Governance] BLOCKED: the policy snapshot is empty"},
		{"snapshot corrupt", good, nil, []string{"--snapshot", corrupt}, "[Intutic Governance] BLOCKED: the policy snapshot is not valid JSON"},
		{"another workspace", good, nil, []string{"--snapshot", snap, "--workspace", "ws_999"}, `[Intutic Governance] BLOCKED: the policy snapshot is for workspace "ws_123", not "ws_999"`},
		// The environment is the agent's to write (Claude Code applies settings-file env to
		// hooks), so it never names the snapshot: the default path is used, and absent here.
		{"snapshot named only by env", good, []string{"INTUTIC_GATE_SNAPSHOT=" + snap}, nil, "[Intutic Governance] BLOCKED: no policy snapshot at /opt/intutic/hooks/"},
		{"stdin malformed", []byte(`{"tool_name": "Bash", `), nil, []string{"--snapshot", snap}, "[Intutic Governance] BLOCKED: the hook input is not valid JSON"},
		{"stdin empty", nil, nil, []string{"--snapshot", snap}, "[Intutic Governance] BLOCKED: the hook input is not valid JSON"},
		{"stdin without tool_name", []byte(`{"hook_event_name":"PreToolUse"}`), nil, []string{"--snapshot", snap}, "[Intutic Governance] BLOCKED: the hook input has no tool_name"},
		{"stdin over 4 MiB", oversized, nil, []string{"--snapshot", snap}, "[Intutic Governance] BLOCKED: the hook input is larger than 4194304 bytes"},
		{"another hook event", payload("Bash", map[string]any{"command": "ls"}, map[string]any{"hook_event_name": "PostToolUse"}), nil, []string{"--snapshot", snap}, `[Intutic Governance] BLOCKED: the gate answers PreToolUse, not "PostToolUse"`},
		{"unknown flag", good, nil, []string{"--snapshot", snap, "--allow-everything"}, "[Intutic Governance] BLOCKED: gate-hook was started with invalid flags"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runHook(t, tc.stdin, tc.env, tc.args...)
			if r.exit != 2 {
				t.Fatalf("want exit 2, got %+v", r)
			}
			d := decision(t, r.stdout)
			if d.PermissionDecision != "deny" || !strings.HasPrefix(d.PermissionDecisionReason, tc.prefix) {
				t.Fatalf("want a deny starting %q, got %+v", tc.prefix, d)
			}
			if !strings.Contains(r.stderr, tc.prefix) {
				t.Fatalf("stderr %q lacks %q", r.stderr, tc.prefix)
			}
		})
	}
}

// TestEnvironmentIsIgnored: no variable an agent's settings file can set changes the answer.
func TestEnvironmentIsIgnored(t *testing.T) {
	snap := writeSnapshot(t, "ws_123")
	in := payload("Bash", map[string]any{"command": "ls"}, nil)

	r := runHook(t, in, nil, "--snapshot", snap, "--explicit-allow")
	if d := decision(t, r.stdout); r.exit != 0 || d.PermissionDecision != "allow" {
		t.Fatalf("--explicit-allow: want permissionDecision allow, got %+v", r)
	}
	r = runHook(t, in, []string{"INTUTIC_GATE_EXPLICIT_ALLOW=true"}, "--snapshot", snap)
	if r.exit != 0 || r.stdout != "" {
		t.Fatalf("INTUTIC_GATE_EXPLICIT_ALLOW must not change the answer: want a silent allow, got %+v", r)
	}
	r = runHook(t, in, []string{"INTUTIC_GATE_WORKSPACE=ws_999"}, "--snapshot", snap)
	if r.exit != 0 {
		t.Fatalf("INTUTIC_GATE_WORKSPACE must not change the answer: got %+v", r)
	}
	blocked := payload("Bash", map[string]any{"command": "rm -rf /"}, nil)
	r = runHook(t, blocked, []string{"INTUTIC_GATE_EXPLICIT_ALLOW=true", "INTUTIC_GATE_SNAPSHOT=/dev/null"}, "--snapshot", snap)
	if r.exit != 2 {
		t.Fatalf("a blocked call under a hostile environment: want exit 2, got %+v", r)
	}
}

// TestAuditedBlockProceeds: under a policy set to Audit a Block rule's call exits 0 with no
// permission decision and nothing on stderr; the user is told it would have been blocked. A
// rule set to Enforce still blocks, and so does a fault.
func TestAuditedBlockProceeds(t *testing.T) {
	snap := writeSnapshotOf(t, gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1, Enforcement: gate.Audit})
	cases := []struct {
		name, tool string
		input      map[string]any
		note       string
	}{
		{"would block", "Bash", map[string]any{"command": "rm -rf / " + secret}, "[Intutic Governance] AUDIT: would block: destructive command on the root filesystem"},
		{"would ask", "WebFetch", map[string]any{"url": "https://paste.example/raw", "prompt": secret}, "[Intutic Governance] AUDIT: would ask: fetching from outside github.com needs a human"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runHook(t, payload(tc.tool, tc.input, nil), nil, "--snapshot", snap)
			var out claudecode.HookOutput
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
				t.Fatalf("stdout is not hook JSON: %+v", r)
			}
			if r.exit != 0 || r.stderr != "" || out.SystemMessage != tc.note || out.HookSpecificOutput.PermissionDecision != "" ||
				out.HookSpecificOutput.HookEventName != "PreToolUse" {
				t.Fatalf("want exit 0, no decision, systemMessage %q; got %+v", tc.note, r)
			}
		})
	}
	if r := runHook(t, payload("Read", map[string]any{"file_path": "/w/a.go"}, nil), nil, "--snapshot", snap); r.exit != 0 || r.stdout != "" {
		t.Fatalf("an Allow with nothing audited must stay silent: %+v", r)
	}
	rules := policyRules()
	rules[0].Enforcement = gate.Enforce
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 2, Enforcement: gate.Audit}, rules)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := s.Encode()
	enforced := filepath.Join(t.TempDir(), gate.SnapshotFileName)
	if err := os.WriteFile(enforced, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runHook(t, payload("Bash", map[string]any{"command": "rm -rf /"}, nil), nil, "--snapshot", enforced); r.exit != 2 || decision(t, r.stdout).PermissionDecision != "deny" {
		t.Fatalf("a rule set to Enforce in an Audit policy must block: %+v", r)
	}
	tampered := filepath.Join(t.TempDir(), gate.SnapshotFileName)
	if err := os.WriteFile(tampered, bytes.Replace(data, []byte("destructive"), []byte("harmless"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runHook(t, payload("Read", map[string]any{"file_path": "/w/a.go"}, nil), nil, "--snapshot", tampered); r.exit != 2 {
		t.Fatalf("a tampered Audit snapshot must block: %+v", r)
	}
}

func TestInstall(t *testing.T) {
	dir := t.TempDir()
	r := runHook(t, nil, nil, "--install", dir)
	if r.exit != 0 {
		t.Fatalf("--install: %+v", r)
	}
	installed := filepath.Join(dir, "gate-hook")
	fi, err := os.Stat(installed)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed binary: %v %v", fi, err)
	}
	// The copy is a working hook.
	snap := writeSnapshot(t, "")
	cmd := exec.Command(installed, "--snapshot", snap)
	cmd.Stdin = bytes.NewReader(payload("Bash", map[string]any{"command": "rm -rf /"}, nil))
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("the installed hook did not block: %v", err)
	}
}

// TestAnswerToken: with --answer-token, every answer (allow, block, a refusal of its own)
// begins with the answer line the registered command checks, and then is the answer it would
// be without; a token that could end the line early is refused.
func TestAnswerToken(t *testing.T) {
	snap := writeSnapshot(t, "")
	const token = "0b8e2a4c-5d6f-4a1b-9c3d-7e8f9a0b1c2d"
	line := "gate-answer " + token + "\n"
	for _, tc := range []struct {
		name  string
		stdin []byte
		snap  string
		exit  int
	}{
		{"allow", payload("Bash", map[string]any{"command": "go test ./..."}, nil), snap, 0},
		{"block", payload("Bash", map[string]any{"command": "rm -rf / --no-preserve-root"}, nil), snap, 2},
		{"a refusal of its own", payload("Bash", map[string]any{"command": "ls"}, nil), filepath.Join(t.TempDir(), "absent"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain := runHook(t, tc.stdin, nil, "--snapshot", tc.snap)
			r := runHook(t, tc.stdin, nil, "--snapshot", tc.snap, "--answer-token", token)
			if r.exit != tc.exit || plain.exit != tc.exit {
				t.Fatalf("exit %d (without the token %d), want %d", r.exit, plain.exit, tc.exit)
			}
			if r.stdout != line+plain.stdout {
				t.Fatalf("stdout %q, want the answer line and then %q", r.stdout, plain.stdout)
			}
		})
	}
	for _, bad := range []string{"a\nb", "a b", strings.Repeat("a", 65), "ä"} {
		r := runHook(t, payload("Bash", map[string]any{"command": "go test ./..."}, nil), nil, "--snapshot", snap, "--answer-token", bad)
		if r.exit != 2 || strings.Contains(r.stdout, "gate-answer") {
			t.Errorf("token %q: exit %d stdout %q, want a refusal without an answer line", bad, r.exit, r.stdout)
		}
	}
}
