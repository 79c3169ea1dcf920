//go:build conformance

package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/openai/responsestest"
)

const codexPkg = "@openai/codex"

// codexBinary is the pinned Codex CLI's native binary, which npm ci installed.
func codexBinary(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("node_modules", "@openai", "codex-linux-x64", "vendor", "x86_64-unknown-linux-musl", "bin", "codex"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the pinned Codex CLI (npm ci installs it): %v", err)
	}
	return bin
}

// The models the stand-in plays: apply_patch is offered only to the models of Codex's own
// catalog (gpt-5.5), and MCP tools are offered directly only to the others (gpt-5), not behind
// tool_search.
const (
	codexModel      = "gpt-5"
	codexPatchModel = "gpt-5.5"
)

// codexRun is what a Codex case's check judges.
type codexRun struct {
	result responsestest.ToolResult
	marker bool
	run    offlineRun
}

type codexCheck func(r codexRun) (bool, string)

// codexBlocked passes when the model got the gate's refusal with reason, as Codex reports a
// PreToolUse hook's deny, and the marker does not exist.
func codexBlocked(reason string) codexCheck {
	return func(r codexRun) (bool, string) {
		switch {
		case !r.result.Answered:
			return false, "the model never received the call's output; stderr: " + r.run.stderr
		// With exit 2 Codex reports the hook's stderr, which for a fault of the registration holds
		// the shell's own complaint before the refusal.
		case !strings.Contains(r.result.Content, "blocked by PreToolUse hook: ") || !strings.Contains(r.result.Content, refusal+reason):
			return false, "output " + r.result.Content
		case r.marker:
			return false, "the blocked call ran: the marker exists"
		}
		return true, ""
	}
}

func codexRan(what string) codexCheck {
	return func(r codexRun) (bool, string) {
		if !r.marker {
			return false, what + " did not run: " + r.result.Content + "; stderr: " + r.run.stderr
		}
		return true, ""
	}
}

// codexCase is one case of TestCodexCLI.
type codexCase struct {
	name   string
	script func(marker string) responsestest.Script
	model  string
	// marker is where the case's marker lives, relative to the workspace ("" for the default,
	// outside it).
	marker string
	mcp    bool
	// userConfig is TOML the agent appended to its own config.toml; project is its workspace's
	// .codex/config.toml, trusted by the user config.
	userConfig, project string
	args                []string
	fault               func(hooks string) error
	check               codexCheck
}

func codexShell(cmd string) responsestest.Script {
	return responsestest.Script{Name: "exec_command", Arguments: map[string]any{"cmd": cmd}}
}

// TestCodexCLI runs the pinned Codex CLI (codex exec) against the Responses API stand-in,
// offline (runOffline), in a private mount namespace whose /etc/codex holds the sample policy's
// requirements.toml and managed_config.toml as the bundle renders them, with the bundle and
// gate-hook as a pod has them. Codex runs with --sandbox danger-full-access, as in a pod (its own
// sandbox needs user namespaces, which a restricted pod does not give): only the gate stands
// between a call and its effect.
func TestCodexCLI(t *testing.T) {
	hookBin := buildHook(t)
	codex := codexBinary(t)
	touch := func(m string) responsestest.Script { return codexShell("touch " + shq(m)) }
	rmTouch := func(m string) responsestest.Script {
		return codexShell("rm -rf /nonexistent-gate-conformance; touch " + shq(m))
	}
	destructive := codexBlocked("destructive command on the root filesystem")
	noAnswer := codexBlocked("the gate-hook wrapper gave no decided answer")
	patch := func(file string) string {
		return "*** Begin Patch\n*** Add File: " + file + "\n+written by the agent\n*** End Patch"
	}
	hooksOff := "[features]\nhooks = false\n"
	cases := []codexCase{
		{name: "a blocked shell command is refused and does not run", script: rmTouch, check: destructive},
		{name: "an allowed shell command runs", script: touch, check: codexRan("the allowed command")},
		// The CLI's workspace is the run's directory; the policy's is /workspace.
		{name: "an apply_patch outside the workspace is refused", model: codexPatchModel, marker: "patched.txt",
			script: func(m string) responsestest.Script {
				return responsestest.Script{Type: responsestest.CustomToolCall, Name: "apply_patch", Input: patch(m)}
			},
			check: codexBlocked("agents write only inside /workspace")},
		{name: "an apply_patch given to the shell tool outside the workspace is refused", marker: "heredoc.txt",
			script: func(m string) responsestest.Script {
				return codexShell("apply_patch <<'EOF'\n" + patch(m) + "\nEOF")
			},
			check: codexBlocked("agents write only inside /workspace")},
		{name: "a fetch of a paste site is refused", script: func(m string) responsestest.Script {
			return codexShell("curl -s https://pastebin.example/raw/x; touch " + shq(m))
		}, check: codexBlocked("paste sites are a known exfiltration channel")},
		{name: "an Ask is a refusal that says a human must approve", script: func(m string) responsestest.Script {
			return codexShell("curl -s https://docs.example.org/guide; touch " + shq(m))
		}, check: codexBlocked("fetching from outside github.com needs a human (a human must approve this call, and Codex's hook cannot ask one)")},
		{name: "an MCP tool (mcp__deploy__release) to production is refused", mcp: true, script: func(string) responsestest.Script {
			return responsestest.Script{Namespace: "mcp__deploy", Name: "release", Arguments: map[string]any{"service": "api", "environment": "production"}}
		}, check: codexBlocked("production deploys go through the release pipeline")},
		{name: "an MCP tool (mcp__deploy__release) to staging runs", mcp: true, script: func(string) responsestest.Script {
			return responsestest.Script{Namespace: "mcp__deploy", Name: "release", Arguments: map[string]any{"service": "api", "environment": "staging"}}
		}, check: codexRan("the allowed MCP call (it reaches the server)")},
		{name: "the hooks feature turned off in the agent's config.toml leaves the gate in force", script: rmTouch, userConfig: hooksOff, check: destructive},
		{name: "the hooks feature turned off in a trusted project's .codex/config.toml leaves the gate in force", script: rmTouch, project: hooksOff, check: destructive},
		{name: "--disable hooks and -c features.hooks=false leave the gate in force", script: rmTouch,
			args: []string{"--disable", "hooks", "-c", "features.hooks=false"}, check: destructive},
		{name: "a hook of the agent's own that allows and rewrites the call does not run", script: rmTouch,
			userConfig: "[[hooks.PreToolUse]]\nmatcher = \"*\"\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = " +
				strconv.Quote(`printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"mine","updatedInput":{"command":"true"}}}'`) + "\n",
			args: []string{"--dangerously-bypass-hook-trust"}, check: destructive},
		{name: "relaunching with another CODEX_HOME is refused", script: func(m string) responsestest.Script {
			return codexShell("CODEX_HOME=/tmp/elsewhere touch " + shq(m))
		}, check: codexBlocked("agents do not move or turn off their runtime's managed configuration")},
		{name: "a missing hook wrapper blocks", script: touch,
			fault: func(h string) error { return os.Remove(filepath.Join(h, bootstrap.KeyHookScript)) }, check: noAnswer},
		{name: "an empty hook wrapper blocks", script: touch,
			fault: func(h string) error { return os.WriteFile(filepath.Join(h, bootstrap.KeyHookScript), nil, 0o644) }, check: noAnswer},
		{name: "a corrupt snapshot blocks", script: touch,
			fault: func(h string) error {
				return os.WriteFile(filepath.Join(h, gate.SnapshotFileName), []byte(`{"apiVersion":`), 0o644)
			},
			check: codexBlocked("the policy snapshot is not valid JSON")},
	}
	var offline strayLog
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCodex(t, codex, hookBin, tc)
			offline.check(tc.name, r.run)
			ok, detail := tc.check(r)
			record(t, codexPkg, tc.name, ok, detail)
		})
	}
	offline.record(t, codexPkg)
}

// runCodex runs one case: the bundle and /etc/codex as a pod has them, the agent's own
// configuration, and codex exec offline.
func runCodex(t *testing.T, codex, hookBin string, tc codexCase) codexRun {
	t.Helper()
	hooks, etc, home, work := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	bundle(t, hooks, hookBin)
	if tc.fault != nil {
		if err := tc.fault(hooks); err != nil {
			t.Fatal(err)
		}
	}
	for key, file := range map[string]string{bootstrap.KeyCodexRequirements: "requirements.toml", bootstrap.KeyCodexManagedConfig: "managed_config.toml"} {
		b, err := os.ReadFile(filepath.Join(hooks, key))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(etc, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	marker := filepath.Join(t.TempDir(), "marker")
	if tc.marker != "" {
		marker = filepath.Join(work, tc.marker)
	}
	model := tc.model
	if model == "" {
		model = codexModel
	}
	if err := os.MkdirAll("/etc/codex", 0o755); err != nil {
		t.Fatalf("creating the mount point: %v", err)
	}
	s := &responsestest.Server{}
	s.SetScript(tc.script(marker))
	config := fmt.Sprintf("model = %q\nmodel_provider = \"stand\"\n\n[model_providers.stand]\nname = \"stand-in\"\nbase_url = %q\nwire_api = \"responses\"\nenv_key = \"STAND_KEY\"\n",
		model, "http://"+offlineStandIn+"/v1")
	if tc.mcp {
		server, _ := filepath.Abs("mcp-server.mjs")
		config += fmt.Sprintf("\n[mcp_servers.deploy]\ncommand = \"node\"\nargs = [%q]\nenv = { MARKER = %q }\n", server, marker)
	}
	if tc.project != "" {
		config += fmt.Sprintf("\n[projects.%q]\ntrust_level = \"trusted\"\n", work)
		writeFile(t, filepath.Join(work, ".codex", "config.toml"), tc.project)
	}
	config += "\n" + tc.userConfig
	writeFile(t, filepath.Join(home, "config.toml"), config)
	args := append([]string{"-m", "--propagation", "private", "sh", "-c", `mount --bind "$1" /etc/codex && shift && exec "$@"`, "sh", etc,
		codex, "exec", "--skip-git-repo-check", "--sandbox", "danger-full-access"}, tc.args...)
	cmd := exec.Command("unshare", append(args, "do the task")...)
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home, "STAND_KEY=conformance"}
	run := runOffline(t, s, cmd)
	return codexRun{result: s.ToolResult(), marker: fileExists(marker), run: run}
}

// writeFile writes text to path, creating its directory.
func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
