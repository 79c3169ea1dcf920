package bootstrap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/egress"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/claudecode"
	"github.com/intutic/gate-operator/internal/runtime/runtimes"
)

// marshal encodes settings as indented JSON without HTML escaping, newline-terminated.
func marshal(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// Claude Code settings (specs/harness-workflow-wire.md section 4.4).
type claudeHook struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int    `json:"timeout"`
	// OnFailure "block" makes Claude Code (2.1.332 and later) treat every failure of the
	// command (an exit status other than 0 and 2, a command that cannot start, the timeout) as
	// exit 2; without it, each of them runs the tool (specs/harness-workflow-wire.md section 6).
	OnFailure string `json:"onFailure"`
}

type claudeMatcher struct {
	Matcher string       `json:"matcher"`
	Hooks   []claudeHook `json:"hooks"`
}

type claudeSettingsFile struct {
	// RequiredMinimumVersion makes an older Claude Code exit at start instead of running with
	// hook fields it does not know (only honoured in managed settings).
	RequiredMinimumVersion string                     `json:"requiredMinimumVersion,omitempty"`
	AllowManagedHooksOnly  bool                       `json:"allowManagedHooksOnly,omitempty"`
	DisableAllHooks        *bool                      `json:"disableAllHooks,omitempty"`
	Env                    map[string]string          `json:"env,omitempty"`
	Hooks                  map[string][]claudeMatcher `json:"hooks"`
}

// HookCommand is how the registered command starts the wrapper: through env -i, so the
// wrapper's shell starts with an empty environment (no exported shell functions such as
// BASH_FUNC_wait%%, no SHELLOPTS, nothing the agent's settings put there), and with absolute
// paths only, since a bare name would be looked up on a PATH those settings can set.
const HookCommand = "/usr/bin/env -i /bin/sh"

// registeredCommand is the command the settings register with Claude Code, which runs it with
// /bin/sh -c (that outer shell is protected by PinnedEnv). It fails closed on its own, for a
// Claude Code that ignores onFailure: it hands the wrapper a fresh token per call (a UUID from
// the kernel), and lets exit 0 or 2 through only when the answer's first line echoes that
// token (gate-hook --answer-token, claudecode.AnswerLine), with the line stripped. Every other
// end is a deny with exit 2: a missing, unreadable, empty, truncated or replaced wrapper, a
// missing /usr/bin/env or /proc, an old gate-hook that does not know the token, a shell that
// ran nothing. Only builtins run besides the wrapper (read, [, printf), so nothing on PATH is
// looked up; it is POSIX sh, for dash, bash and busybox alike.
//
// runtime is the runtime whose hook runs it (internal/runtime/runtimes): the deny is in its
// format, and the wrapper is told it unless it is Claude Code's, the wrapper's default, so
// Claude Code's registered command is the same as before the others.
func registeredCommand(opts Options, runtime runtimes.Runtime) string {
	refusal := gate.RefusalPrefix + "the gate-hook wrapper gave no decided answer"
	deny := runtime.Deny(refusal)
	arg := ""
	if runtime.Name != runtimes.Default {
		arg = " " + runtime.Name
	}
	return fmt.Sprintf(`n=; read -r n </proc/sys/kernel/random/uuid
o=$(%s %s "$n"%s); s=$?
nl='
'
if [ -n "$n" ] && [ "${o%%%%"$nl"*}" = "%s$n" ] && { [ "$s" = 0 ] || [ "$s" = 2 ]; }; then
  case $o in *"$nl"*) printf '%%s
' "${o#*"$nl"}" ;; esac
  exit "$s"
fi
printf '%%s
' %s
printf '%%s
' %s >&2
exit 2`, HookCommand, shellWord(path.Join(opts.MountDir, KeyHookScript)), arg, claudecode.AnswerPrefix,
		shellQuote(strings.TrimSuffix(string(deny), "\n")), shellQuote(refusal))
}

// PinnedEnv is the environment the managed settings pin for Claude Code and every process it
// starts, hooks included. Claude Code merges the env of user, project and local settings (files
// the agent can write) under the managed settings' env, so pinning a variable here is the only
// way to keep the agent from setting it. Pinned are what the shell Claude Code starts the hook
// with reads before it runs the hook command: the dynamic loader's code-loading variables (the
// agent's own code in the shell before the wrapper starts) and bash's startup variables, which
// matter where /bin/sh is bash (RHEL, UBI, Fedora, Amazon Linux): SHELLOPTS=noexec makes it run
// nothing and exit 0, BASH_ENV and ENV name files it runs, PS4 is expanded under xtrace. Empty
// values disable them all.
var PinnedEnv = map[string]string{
	"LD_PRELOAD":      "",
	"LD_AUDIT":        "",
	"LD_LIBRARY_PATH": "",
	"SHELLOPTS":       "",
	"BASHOPTS":        "",
	"BASH_ENV":        "",
	"ENV":             "",
	"PS4":             "",
}

// claudeSettings registers the wrapper as the PreToolUse hook of every tool. The managed form
// also turns off user, project and local hooks, keeps them from turning all hooks off, and
// pins the environment the hook runs in (PinnedEnv).
func claudeSettings(opts Options, managed bool) (string, error) {
	f := claudeSettingsFile{
		Hooks: map[string][]claudeMatcher{
			"PreToolUse": {{
				Matcher: "*",
				// Claude Code runs the command through a shell: a mount directory with spaces or
				// shell characters is quoted, or the hook would fail to start.
				Hooks: []claudeHook{{Type: "command", Command: registeredCommand(opts, claudeCode), Timeout: opts.HookTimeout, OnFailure: "block"}},
			}},
		},
	}
	if managed {
		f.RequiredMinimumVersion = opts.ClaudeCodeMinimumVersion
		f.AllowManagedHooksOnly = true
		f.DisableAllHooks = new(false)
		f.Env = PinnedEnv
	}
	return marshal(f)
}

// harnessSettingsFile is the recommended settings, a value to spread into HarnessAgentSettings.
type harnessSettingsFile struct {
	PermissionMode gatev1.PermissionMode `json:"permissionMode"`
	InactiveTools  []string              `json:"inactiveTools,omitempty"`
	ToolApproval   map[string]string     `json:"toolApproval,omitempty"`
}

// harnessNetworkPolicy is a HarnessV1NetworkPolicy, the argument of setNetworkPolicy:
// {mode:"deny-all"} or a custom policy with at least one allowed host or CIDR.
type harnessNetworkPolicy struct {
	Mode         string   `json:"mode"`
	AllowedHosts []string `json:"allowedHosts,omitempty"`
	AllowedCIDRs []string `json:"allowedCIDRs,omitempty"`
	DeniedCIDRs  []string `json:"deniedCIDRs,omitempty"`
}

// harnessFiles are the policy's two harness files. @ai-sdk/harness takes them at two places
// (specs/harness-workflow-wire.md sections 1.1-1.5): the settings when a HarnessAgent is
// constructed, the network policy through the sandbox session's setNetworkPolicy, which
// HarnessAgent never calls. Each file is exactly the value its place takes.
type harnessFiles struct {
	settings, networkPolicy string
}

func renderHarness(spec *gatev1.HarnessAgentPolicySpec) (harnessFiles, error) {
	settings, err := marshal(harnessSettings(spec))
	if err != nil {
		return harnessFiles{}, err
	}
	policy, err := marshal(harnessNetworkPolicyOf(&spec.Egress))
	if err != nil {
		return harnessFiles{}, err
	}
	return harnessFiles{settings: settings, networkPolicy: policy}, nil
}

func harnessSettings(spec *gatev1.HarnessAgentPolicySpec) harnessSettingsFile {
	s := harnessSettingsFile{PermissionMode: spec.PermissionMode}
	if s.PermissionMode == "" {
		s.PermissionMode = gatev1.PermissionModeAllowEdits
	}
	if spec.FilterBash == nil || *spec.FilterBash {
		s.InactiveTools = []string{"bash"}
	}
	if len(spec.Tools.Approve)+len(spec.Tools.Deny) > 0 {
		s.ToolApproval = map[string]string{}
		for _, t := range spec.Tools.Approve {
			s.ToolApproval[string(t)] = "user-approval"
		}
		for _, t := range spec.Tools.Deny {
			s.ToolApproval[string(t)] = "denied" // deny wins should the schema ever let both through
		}
	}
	return s
}

// harnessNetworkPolicyOf is the egress as the sandbox runtime enforces it. A spec that allows
// nothing is deny-all, never a custom policy with only denied CIDRs (which the type rejects).
func harnessNetworkPolicyOf(e *gatev1.EgressSpec) harnessNetworkPolicy {
	if egress.IsDenyAll(e) {
		return harnessNetworkPolicy{Mode: "deny-all"}
	}
	np := harnessNetworkPolicy{Mode: "custom", DeniedCIDRs: egress.DeniedCIDRs(e)}
	for _, h := range e.AllowedHosts {
		np.AllowedHosts = append(np.AllowedHosts, string(h))
	}
	for _, c := range e.AllowedCIDRs {
		np.AllowedCIDRs = append(np.AllowedCIDRs, string(c))
	}
	slices.Sort(np.AllowedHosts)
	slices.Sort(np.AllowedCIDRs)
	return np
}
