//go:build conformance

package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/anthropic/messagestest"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/testutil"
)

const claudePkg = "@anthropic-ai/claude-agent-sdk"

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

// claudeBinary is the pinned Claude Code binary npm ci installed.
func claudeBinary(t *testing.T) string {
	t.Helper()
	claude, err := filepath.Abs(filepath.Join("node_modules", "@anthropic-ai", "claude-agent-sdk-linux-x64", "claude"))
	if err != nil {
		t.Fatal(err)
	}
	return claude
}

// claudeArgs runs Claude Code once in print mode, answering in JSON.
func claudeArgs(extra ...string) []string {
	return append([]string{"-p", "do the task", "--output-format", "json"}, extra...)
}

// claudeEnv is Claude Code's whole environment: its model API is the stand-in at baseURL, and
// it sends nothing else anywhere.
func claudeEnv(path, home, baseURL string) []string {
	return []string{
		"PATH=" + path, "HOME=" + home,
		"ANTHROPIC_BASE_URL=" + baseURL, "ANTHROPIC_API_KEY=sk-ant-conformance",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1",
	}
}

// claudeRun is what a case's check judges: Claude Code's JSON output, the tool_result the model
// got, and whether the case's marker file exists after the run.
type claudeRun struct {
	out     map[string]any
	stderr  string
	denials []string
	result  messagestest.ToolResult
	marker  bool
}

// parseClaudeRun reads Claude Code's print-mode JSON output and its permission denials.
func parseClaudeRun(t *testing.T, stdout, stderr string) claudeRun {
	t.Helper()
	r := claudeRun{stderr: stderr}
	if err := json.Unmarshal([]byte(stdout), &r.out); err != nil {
		t.Fatalf("claude's JSON output: %v\n%s\n%s", err, stdout, stderr)
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

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// runClaude runs the real Claude Code in print mode against the stand-in, inside a private
// mount namespace whose /etc/claude-code is a bind mount of managedDir. Nothing is written
// to the host's /etc but an empty mount point.
// runClaudeWithShell is runClaude with /bin/sh replaced, inside the mount namespace only, by
// shell (a path such as /bin/bash), as on distributions whose /bin/sh is bash; "" keeps it.
func runClaudeWithShell(t *testing.T, standIn *messagestest.Server, managedDir, work, home, shell string, extra ...string) claudeRun {
	t.Helper()
	return runClaudeIn(t, standIn, managedDir, work, home, sandbox{shell: shell}, extra...)
}

// sandbox is what a run changes in its mount namespace besides /etc/claude-code.
type sandbox struct {
	// shell replaces /bin/sh (a path such as /bin/bash); "" keeps it.
	shell string
	// noEnv makes /usr/bin/env unusable (/dev/null bound over it: exec fails, status 126),
	// as in an agent image without it.
	noEnv bool
	// uid runs Claude Code as this user instead of root (0), so file modes apply to it.
	uid int
}

// runClaudeIn is runClaude in sandbox sb.
func runClaudeIn(t *testing.T, standIn *messagestest.Server, managedDir, work, home string, sb sandbox, extra ...string) claudeRun {
	t.Helper()
	srv := httptest.NewServer(standIn)
	defer srv.Close()
	claude := claudeBinary(t)
	if err := os.MkdirAll("/etc/claude-code", 0o755); err != nil {
		t.Fatalf("creating the mount point: %v", err)
	}
	args := claudeArgs(extra...)
	script := `mount --bind "$1" /etc/claude-code && `
	if sb.shell != "" {
		// /bin/sh may be a symlink (to dash): the bind mount lands on its target, in this
		// namespace only.
		script += `mount --bind ` + sb.shell + ` "$(readlink -f /bin/sh)" && `
	}
	if sb.noEnv {
		script += `mount --bind /dev/null /usr/bin/env && `
	}
	if sb.uid != 0 {
		id := strconv.Itoa(sb.uid)
		script += `shift && exec setpriv --reuid ` + id + ` --regid ` + id + ` --clear-groups -- "$@"`
	} else {
		script += `shift && exec "$@"`
	}
	cmd := exec.Command("unshare", append([]string{"-m", "--propagation", "private", "sh", "-c", script, "sh", managedDir, claude}, args...)...)
	cmd.Dir = work
	cmd.Env = claudeEnv(os.Getenv("PATH"), home, srv.URL)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Logf("claude exited: %v\n%s", err, stderr.String())
	}
	r := parseClaudeRun(t, stdout.String(), stderr.String())
	r.result = standIn.ToolResult()
	return r
}

const refusal = "[Intutic Governance] BLOCKED: "

type check func(r claudeRun) (bool, string)

// blockedWith passes when the model got the gate's refusal with reason and the command did
// not run.
func blockedWith(reason string) check {
	return func(r claudeRun) (bool, string) {
		switch {
		case !r.result.Answered:
			return false, "the model never received a tool_result"
		case !r.result.IsError || !strings.Contains(r.result.Content, refusal+reason):
			return false, fmt.Sprintf("tool_result is_error=%v content %s", r.result.IsError, r.result.Content)
		case r.marker:
			return false, "the blocked command ran: the marker exists"
		}
		return true, ""
	}
}

// ran passes when the marker exists: the allowed call did what it was asked.
func ran(what string) check {
	return func(r claudeRun) (bool, string) {
		if !r.marker {
			return false, what + " did not run: " + r.result.Content
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

// claudeCase is one host case of TestClaudeCode.
type claudeCase struct {
	name     string
	tool     string
	input    func(marker string) map[string]any
	extra    []string
	mcp      bool // configure the offline MCP server "deploy"
	snapshot func(hooksDir string) error
	wrapper  func(path string) error // what a fault left of gate-hook.sh
	sandbox  sandbox
	check    check
}

func TestClaudeCode(t *testing.T) {
	hookBin := buildHook(t)
	cases := []claudeCase{
		{name: "a blocked Bash command is refused and does not run", tool: "Bash",
			input: func(m string) map[string]any {
				return map[string]any{"command": "rm -rf /nonexistent-gate-conformance; touch " + m}
			},
			extra: []string{"--allowedTools", "Bash"},
			check: blockedWith("destructive command on the root filesystem")},
		{name: "an allowed Bash command runs", tool: "Bash",
			input: func(m string) map[string]any { return map[string]any{"command": "touch " + m} },
			extra: []string{"--allowedTools", "Bash"},
			check: ran("the allowed command")},
		{name: "an Ask rule hands the call to Claude's own permission flow", tool: "WebFetch",
			input: func(string) map[string]any {
				return map[string]any{"url": "https://docs.example.org/guide", "prompt": "summarise"}
			},
			extra: []string{"--allowedTools", "WebFetch"},
			check: func(r claudeRun) (bool, string) {
				if strings.Contains(r.result.Content, refusal) {
					return false, "the gate refused instead of asking: " + r.result.Content
				}
				if len(r.denials) == 0 || r.denials[0] != "WebFetch" {
					return false, fmt.Sprintf("print mode has nobody to ask, so Claude's flow must deny it; denials %v, result %s", r.denials, r.result.Content)
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
			check: ran("the allowed MCP call (it reaches the server)")},
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
	// The registration itself fails closed (the managed hook entry's onFailure "block", and the
	// registered command's answer token): whatever is left of the wrapper, the call does not
	// run. Each was a fail-open before: exit 127 (missing, garbage, no env), 126 (unreadable)
	// or 0 (empty).
	// A command the policy allows: with the gate out of the way it runs, and the marker says so.
	touch := func(m string) map[string]any { return map[string]any{"command": "touch " + m} }
	noAnswer := blockedWith("the gate-hook wrapper gave no decided answer")
	for _, f := range []struct {
		name    string
		wrapper func(string) error
		sandbox sandbox
	}{
		{name: "a missing hook wrapper", wrapper: os.Remove},
		{name: "a missing hook wrapper where /bin/sh is bash", wrapper: os.Remove, sandbox: sandbox{shell: "/bin/bash"}},
		{name: "an empty hook wrapper", wrapper: func(p string) error { return os.WriteFile(p, nil, 0o644) }},
		{name: "an unreadable hook wrapper", wrapper: func(p string) error { return os.Chmod(p, 0) }, sandbox: sandbox{uid: nobody}},
		{name: "a garbage hook wrapper", wrapper: func(p string) error { return os.WriteFile(p, []byte("\x7fELF\x02\x01 ((( esac fi"), 0o644) }},
		{name: "an unusable /usr/bin/env", sandbox: sandbox{noEnv: true}},
	} {
		cases = append(cases, claudeCase{name: f.name + " blocks", tool: "Bash", input: touch, extra: []string{"--allowedTools", "Bash"}, wrapper: f.wrapper, sandbox: f.sandbox, check: noAnswer})
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
			if tc.wrapper != nil {
				if err := tc.wrapper(filepath.Join(hooks, bootstrap.KeyHookScript)); err != nil {
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
			markerDir, home := t.TempDir(), t.TempDir()
			marker := filepath.Join(markerDir, "marker")
			if tc.sandbox.uid != 0 {
				// The other user reads the bundle and the settings, and owns what it writes: had
				// the call run, the marker would exist.
				shareWith(t, tc.sandbox.uid, []string{hooks, managed}, []string{work, home, markerDir})
			}
			s := messagestest.New(tc.tool, tc.input(marker))
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
			r := runClaudeIn(t, s, managed, work, home, tc.sandbox, extra...)
			r.marker = fileExists(marker)
			ok, detail := tc.check(r)
			record(t, claudePkg, tc.name, ok, detail)
		})
	}
}

// nobody is the user the unreadable-wrapper case runs Claude Code as: root reads a mode 000
// file, the agent's user does not.
const nobody = 65534

// shareWith lets uid read the dirs in read (and the temporary directories above them) and
// own the dirs in own.
func shareWith(t *testing.T, uid int, read, own []string) {
	t.Helper()
	for _, d := range append(read, own...) {
		for _, p := range []string{d, filepath.Dir(d)} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, d := range own {
		if err := os.Chown(d, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
}
