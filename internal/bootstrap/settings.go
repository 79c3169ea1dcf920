package bootstrap

import (
	"bytes"
	"encoding/json"
	"path"
	"slices"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/egress"
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
}

type claudeMatcher struct {
	Matcher string       `json:"matcher"`
	Hooks   []claudeHook `json:"hooks"`
}

type claudeSettingsFile struct {
	AllowManagedHooksOnly bool                       `json:"allowManagedHooksOnly,omitempty"`
	DisableAllHooks       *bool                      `json:"disableAllHooks,omitempty"`
	Env                   map[string]string          `json:"env,omitempty"`
	Hooks                 map[string][]claudeMatcher `json:"hooks"`
}

// HookShell runs the wrapper. An absolute path: a bare "sh" would be looked up on a PATH that
// the agent's own settings can set.
const HookShell = "/bin/sh"

// PinnedEnv is the environment the managed settings pin for Claude Code and every process it
// starts, hooks included. Claude Code merges the env of user, project and local settings (files
// the agent can write) under the managed settings' env, so pinning a variable here is the only
// way to keep the agent from setting it. These are the dynamic loader's code-loading variables:
// through them the agent could run its own code inside the hook's shell before the wrapper
// starts. Empty values disable them. The wrapper itself reads nothing else from the env.
var PinnedEnv = map[string]string{
	"LD_PRELOAD":      "",
	"LD_AUDIT":        "",
	"LD_LIBRARY_PATH": "",
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
				Hooks: []claudeHook{{Type: "command", Command: HookShell + " " + shellWord(path.Join(opts.MountDir, KeyHookScript)), Timeout: opts.HookTimeout}},
			}},
		},
	}
	if managed {
		f.AllowManagedHooksOnly = true
		f.DisableAllHooks = new(false)
		f.Env = PinnedEnv
	}
	return marshal(f)
}

// harnessSettingsFile is the recommended @ai-sdk/harness settings, a value to spread into
// HarnessAgentSettings (specs/harness-workflow-wire.md sections 1.1-1.5).
type harnessSettingsFile struct {
	PermissionMode gatev1.PermissionMode `json:"permissionMode"`
	InactiveTools  []string              `json:"inactiveTools,omitempty"`
	ToolApproval   map[string]string     `json:"toolApproval,omitempty"`
	NetworkPolicy  harnessNetworkPolicy  `json:"networkPolicy"`
}

// harnessNetworkPolicy is HarnessV1NetworkPolicy: {mode:"deny-all"} or a custom policy.
type harnessNetworkPolicy struct {
	Mode         string   `json:"mode"`
	AllowedHosts []string `json:"allowedHosts,omitempty"`
	AllowedCIDRs []string `json:"allowedCIDRs,omitempty"`
	DeniedCIDRs  []string `json:"deniedCIDRs,omitempty"`
}

func harnessSettings(spec *gatev1.HarnessAgentPolicySpec) (string, error) {
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
	if egress.IsDenyAll(&spec.Egress) {
		s.NetworkPolicy = harnessNetworkPolicy{Mode: "deny-all"}
	} else {
		np := harnessNetworkPolicy{Mode: "custom", DeniedCIDRs: egress.DeniedCIDRs(&spec.Egress)}
		for _, h := range spec.Egress.AllowedHosts {
			np.AllowedHosts = append(np.AllowedHosts, string(h))
		}
		for _, c := range spec.Egress.AllowedCIDRs {
			np.AllowedCIDRs = append(np.AllowedCIDRs, string(c))
		}
		slices.Sort(np.AllowedHosts)
		slices.Sort(np.AllowedCIDRs)
		s.NetworkPolicy = np
	}
	return marshal(s)
}
