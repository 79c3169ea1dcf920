package bootstrap

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	toml "github.com/pelletier/go-toml/v2"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// registered is the hook entry a bundle's settings file registers with Claude Code.
type registered struct {
	Type, Command, OnFailure string
	Timeout                  int
}

func registeredHook(t *testing.T, settings string) registered {
	t.Helper()
	var s struct {
		Hooks map[string][]struct {
			Matcher string
			Hooks   []registered
		}
	}
	if err := json.Unmarshal([]byte(settings), &s); err != nil {
		t.Fatal(err)
	}
	pre := s.Hooks["PreToolUse"]
	if len(pre) != 1 || pre[0].Matcher != "*" || len(pre[0].Hooks) != 1 {
		t.Fatalf("want one PreToolUse hook on every tool, got %+v", pre)
	}
	return pre[0].Hooks[0]
}

// TestRegisteredCommandFailsClosed runs the command the managed settings register, as Claude
// Code runs it (a shell's -c), with the wrapper and gate-hook in every state a fault or a pod
// author can leave them in. Claude Code runs the tool on every exit status but 2 (and, without
// onFailure, also when the command cannot start), so only an answer gate-hook decided for this
// very call may exit 0; everything else must exit 2. Before the answer token, an empty wrapper
// exited 0 (an allow), and a missing or unreadable one 126 or 127 (the tool ran).
func TestRegisteredCommandFailsClosed(t *testing.T) {
	var shells []string
	for _, sh := range []string{"/bin/sh", "dash", "bash", "busybox"} {
		if p, err := exec.LookPath(sh); err == nil {
			shells = append(shells, p)
		}
	}
	const denyJSON = `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}`
	const auditJSON = `{"systemMessage":"audited","hookSpecificOutput":{"hookEventName":"PreToolUse"}}`
	// A stand-in gate-hook: it finds --answer-token among its flags, reads the hook JSON and
	// answers as body says, with $tok the token.
	hook := func(body string) string {
		return `tok=; rt=; while [ $# -gt 0 ]; do [ "$1" = --answer-token ] && tok=$2; [ "$1" = --runtime ] && rt=$2; shift; done; cat >/dev/null; ` + body
	}
	const garbage = "\x7fELF\x00\x01\x02 ((( fi esac"
	cases := []struct {
		name    string
		hook    string // the stand-in gate-hook's body; "" leaves the binary missing
		wrapper func(string) string
		unread  bool // the wrapper is mode 000 and the command runs as another user
		missing bool // there is no wrapper
		exit    int
		stdout  string // exact stdout
		has     string // stdout must contain
	}{
		{name: "a decided allow exits 0 with nothing on stdout", hook: hook(`printf 'gate-answer %s\n' "$tok"; exit 0`), exit: 0, stdout: ""},
		{name: "a decided allow with a message passes the JSON alone", hook: hook(`printf 'gate-answer %s\n%s\n' "$tok" '` + auditJSON + `'; exit 0`), exit: 0, stdout: auditJSON + "\n"},
		{name: "a decided deny passes the JSON alone", hook: hook(`printf 'gate-answer %s\n%s\n' "$tok" '` + denyJSON + `'; exit 2`), exit: 2, stdout: denyJSON + "\n"},
		{name: "an exit 0 without the token blocks (an old or a replaced gate-hook)", hook: hook(`exit 0`), exit: 2, has: "gave no decided answer"},
		{name: "an allow JSON without the token blocks", hook: hook(`echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'; exit 0`), exit: 2, has: "gave no decided answer"},
		{name: "another call's token blocks", hook: hook(`echo 'gate-answer 00000000-0000-0000-0000-000000000000'; exit 0`), exit: 2, has: "gave no decided answer"},
		{name: "the token after the first line blocks", hook: hook(`printf 'x\ngate-answer %s\n' "$tok"; exit 0`), exit: 2, has: "gave no decided answer"},
		{name: "the token with a suffix blocks", hook: hook(`printf 'gate-answer %sx\n' "$tok"; exit 0`), exit: 2, has: "gave no decided answer"},
		{name: "a missing gate-hook blocks with the wrapper's reason", exit: 2, has: "the gate-hook binary is missing"},
		{name: "a missing wrapper blocks", hook: hook(`exit 0`), missing: true, exit: 2, has: "gave no decided answer"},
		{name: "an empty wrapper blocks", hook: hook(`exit 0`), wrapper: func(string) string { return "" }, exit: 2, has: "gave no decided answer"},
		{name: "a garbage wrapper blocks", hook: hook(`exit 0`), wrapper: func(string) string { return garbage }, exit: 2, has: "gave no decided answer"},
		{name: "a wrapper replaced by exit 0 blocks", hook: hook(`exit 0`), wrapper: func(string) string { return "exit 0\n" }, exit: 2, has: "gave no decided answer"},
		{name: "a truncated wrapper blocks", hook: hook(`exit 0`), wrapper: func(w string) string { return w[:strings.Index(w, "deny()")] }, exit: 2, has: "gave no decided answer"},
		{name: "an unreadable wrapper blocks", hook: hook(`exit 0`), unread: true, exit: 2, has: "gave no decided answer"},
		{name: "gate-hook is told the runtime, but Claude Code's", hook: hook(`printf 'gate-answer %s\nruntime=%s.\n' "$tok" "$rt"; exit 0`), exit: 0, has: "runtime=$RUNTIME."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "hooks")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			// Another user must reach the files in the unreadable case.
			if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(dir, "gate-hook")
			if tc.hook != "" {
				if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+tc.hook+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			b, err := Render(&gatev1.HarnessAgentPolicySpec{}, nil, Options{MountDir: dir, HookBin: bin, HookTimeout: 3, HookLimit: 2})
			if err != nil {
				t.Fatal(err)
			}
			reg := registeredHook(t, b.Data[KeyManagedSettings])
			if reg.OnFailure != "block" || reg.Type != "command" || reg.Timeout != 3 {
				t.Fatalf("the managed hook entry is %+v, want a command with onFailure block and timeout 3", reg)
			}
			if project := registeredHook(t, b.Data[KeySettings]); project != reg {
				t.Fatalf("settings.json registers %+v, the managed settings %+v", project, reg)
			}
			// Each runtime's registered command, and what its deny says.
			commands := []struct{ runtime, command, deny string }{
				{"", reg.Command, `"permissionDecision":"deny"`},
				{"codex", codexRegistered(t, b.Data[KeyCodexRequirements], 3), `"permissionDecision":"deny"`},
				{"gemini-cli", geminiRegistered(t, b.Data[KeyGeminiSettings], 3000), `{"decision":"deny","reason":`},
			}
			wrapper := filepath.Join(dir, KeyHookScript)
			script := b.Data[KeyHookScript]
			if tc.wrapper != nil {
				script = tc.wrapper(script)
			}
			mode := os.FileMode(0o644)
			if tc.unread {
				mode = 0
			}
			if err := os.WriteFile(wrapper, []byte(script), mode); err != nil {
				t.Fatal(err)
			}
			if tc.missing {
				os.Remove(wrapper)
			}
			for _, c := range commands {
				for _, sh := range shells {
					argv := []string{sh, "-c", c.command}
					if strings.HasSuffix(sh, "busybox") {
						argv = []string{sh, "sh", "-c", c.command}
					}
					has := strings.ReplaceAll(tc.has, "$RUNTIME", c.runtime)
					cmd := exec.Command(argv[0], argv[1:]...)
					cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
					if tc.unread && os.Geteuid() == 0 {
						// root reads a mode 000 file; the agent's user does not.
						cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
					}
					cmd.Stdin = strings.NewReader(`{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf /etc"}}` + "\n")
					out, errOut, exit := runCommand(t, cmd)
					if exit != tc.exit || (tc.has == "" && out != tc.stdout) || !strings.Contains(out, has) {
						t.Errorf("%s %s: exit %d stdout %q stderr %q; want exit %d, stdout %q containing %q", c.runtime, sh, exit, out, errOut, tc.exit, tc.stdout, has)
					}
					if strings.Contains(out, "gate-answer") {
						t.Errorf("%s %s: the answer line reached the runtime: %q", c.runtime, sh, out)
					}
					if exit == 2 && tc.has != "" && !strings.Contains(out, c.deny) {
						t.Errorf("%s %s: a block must answer the runtime's deny %s, got %q", c.runtime, sh, c.deny, out)
					}
				}
			}
		})
	}
}

// codexRegistered is the command Codex's requirements register as the PreToolUse hook of
// every tool, with managed hooks only and the timeout given.
func codexRegistered(t *testing.T, requirements string, timeout int) string {
	t.Helper()
	var r struct {
		AllowManagedHooksOnly bool `toml:"allow_managed_hooks_only"`
		Features              map[string]bool
		Hooks                 struct {
			PreToolUse []struct {
				Matcher string
				Hooks   []struct {
					Type, Command string
					Timeout       int
				}
			} `toml:"PreToolUse"`
		}
	}
	if err := toml.Unmarshal([]byte(requirements), &r); err != nil {
		t.Fatal(err)
	}
	pre := r.Hooks.PreToolUse
	if !r.AllowManagedHooksOnly || !r.Features["hooks"] || len(pre) != 1 || pre[0].Matcher != "*" || len(pre[0].Hooks) != 1 ||
		pre[0].Hooks[0].Type != "command" || pre[0].Hooks[0].Timeout != timeout {
		t.Fatalf("want managed hooks only, the hooks feature required on, and one PreToolUse command hook on every tool with timeout %d, got %+v", timeout, r)
	}
	return pre[0].Hooks[0].Command
}

// geminiRegistered is the command Gemini CLI's system settings register as the BeforeTool hook
// of every tool, with hooks enabled, the timeout given (ms) and PATH pinned.
func geminiRegistered(t *testing.T, settings string, timeout int) string {
	t.Helper()
	var s struct {
		HooksConfig struct{ Enabled bool }
		Hooks       map[string][]struct {
			Matcher string
			Hooks   []struct {
				Name, Type, Command string
				Timeout             int
				Env                 map[string]string
			}
		}
	}
	if err := json.Unmarshal([]byte(settings), &s); err != nil {
		t.Fatal(err)
	}
	bt := s.Hooks["BeforeTool"]
	if !s.HooksConfig.Enabled || len(bt) != 1 || bt[0].Matcher != "*" || len(bt[0].Hooks) != 1 {
		t.Fatalf("want hooks enabled and one BeforeTool hook on every tool, got %+v", s)
	}
	h := bt[0].Hooks[0]
	_, noRead := h.Env["BASH_FUNC_read%%"]
	if h.Type != "command" || h.Timeout != timeout || h.Name != GeminiHookName || h.Env["PATH"] != hookPath || h.Env["BASH_ENV"] != "" || !noRead {
		t.Fatalf("the BeforeTool hook is %+v", h)
	}
	return h.Command
}

// runCommand runs cmd and returns what it printed and its exit status; a command that cannot
// start fails the test.
func runCommand(t *testing.T, cmd *exec.Cmd) (stdout, stderr string, exit int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		exit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), exit
}
