package bootstrap

import (
	"maps"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/intutic/gate-operator/internal/runtime/claudecode"
	"github.com/intutic/gate-operator/internal/runtime/codex"
	"github.com/intutic/gate-operator/internal/runtime/gemini"
	"github.com/intutic/gate-operator/internal/runtime/runtimes"
)

// The managed configuration of the two other agent runtimes, beside Claude Code's managed
// settings: each registers the same wrapper, through a registered command that fails closed on
// its own, as the hook of every tool, at the tier of that runtime an agent cannot write. The pod
// webhook mounts each where its runtime reads it (docs/sandbox-integration.md).
const (
	// KeyCodexRequirements is Codex CLI's /etc/codex/requirements.toml.
	KeyCodexRequirements = "codex-requirements.toml"
	// KeyCodexManagedConfig is Codex CLI's /etc/codex/managed_config.toml.
	KeyCodexManagedConfig = "codex-managed-config.toml"
	// KeyGeminiSettings is Gemini CLI's system settings, /etc/gemini-cli/settings.json.
	KeyGeminiSettings = "gemini-settings.json"
)

var claudeCode, codexRuntime, geminiRuntime = mustRuntime(claudecode.Name), mustRuntime(codex.Name), mustRuntime(gemini.Name)

func mustRuntime(name string) runtimes.Runtime {
	r, ok := runtimes.Lookup(name)
	if !ok {
		panic("no runtime " + name)
	}
	return r
}

// codexRequirementsFile is the part of Codex's requirements.toml the bundle sets, as observed on
// codex-cli 0.171.0 (docs/sandbox-integration.md):
//   - managed hooks only: no user, project or command-line hook runs, none can stand in for the
//     gate's or rewrite a call it allowed (updatedInput);
//   - the hooks feature required on: without it, [features] hooks = false in any configuration
//     the agent writes (user, profile, trusted project), --disable hooks or -c features.hooks=false
//     turns every hook off, the managed one included;
//   - plugins off (they fetch from GitHub at start) and web search off: Codex's web search runs
//     on the model provider's side, where no hook sees it;
//   - the gate's PreToolUse hook for every tool.
//
// Codex reads keys after a [table] header as that table's, so the top-level keys come first
// (the field order here).
type codexRequirementsFile struct {
	AllowManagedHooksOnly bool          `toml:"allow_managed_hooks_only"`
	AllowedWebSearchModes []string      `toml:"allowed_web_search_modes"`
	Features              codexFeatures `toml:"features"`
	Hooks                 codexHooks    `toml:"hooks"`
}

type codexFeatures struct {
	Hooks   bool `toml:"hooks"`
	Plugins bool `toml:"plugins"`
}

type codexHooks struct {
	PreToolUse []codexMatcher `toml:"PreToolUse"`
}

type codexMatcher struct {
	Matcher string      `toml:"matcher"`
	Hooks   []codexHook `toml:"hooks"`
}

type codexHook struct {
	Type    string `toml:"type"`
	Command string `toml:"command"`
	// Timeout is in seconds.
	Timeout int `toml:"timeout"`
}

// codexRequirements renders requirements.toml.
func codexRequirements(opts Options) (string, error) {
	f := codexRequirementsFile{
		AllowManagedHooksOnly: true,
		AllowedWebSearchModes: []string{"disabled"},
		Features:              codexFeatures{Hooks: true, Plugins: false},
		Hooks: codexHooks{PreToolUse: []codexMatcher{{
			Matcher: "*",
			Hooks:   []codexHook{{Type: "command", Command: registeredCommand(opts, codexRuntime), Timeout: opts.HookTimeout}},
		}}},
	}
	b, err := toml.Marshal(f)
	if err != nil {
		return "", err
	}
	return "# gate-operator: Codex CLI managed requirements (rendered by the operator; do not edit).\n" + string(b), nil
}

// codexManagedConfigFile is Codex's managed_config.toml: the settings it honours only there or
// in a user's configuration, not as requirements: no analytics or OpenTelemetry metrics (sent to
// OpenAI's hosts by default).
type codexManagedConfigFile struct {
	Analytics struct {
		Enabled bool `toml:"enabled"`
	} `toml:"analytics"`
	OTel struct {
		MetricsExporter string `toml:"metrics_exporter"`
	} `toml:"otel"`
}

// codexManagedConfig renders managed_config.toml.
func codexManagedConfig() (string, error) {
	var f codexManagedConfigFile
	f.OTel.MetricsExporter = "none"
	b, err := toml.Marshal(f)
	if err != nil {
		return "", err
	}
	return "# gate-operator: Codex CLI managed configuration (rendered by the operator; do not edit).\n" + string(b), nil
}

// geminiSettingsFile is the part of Gemini CLI's system settings the bundle sets: hooks on, the
// gate's BeforeTool hook for every tool (its env pins PATH, which the CLI looks bash up in to run
// the hook, and the variables the shell reads before the command: PinnedEnv), and no telemetry,
// usage statistics or update checks.
type geminiSettingsFile struct {
	HooksConfig geminiHooksConfig          `json:"hooksConfig"`
	Hooks       map[string][]geminiMatcher `json:"hooks"`
	Privacy     map[string]bool            `json:"privacy"`
	Telemetry   map[string]bool            `json:"telemetry"`
	General     map[string]bool            `json:"general"`
}

type geminiHooksConfig struct {
	Enabled bool `json:"enabled"`
}

type geminiMatcher struct {
	Matcher string       `json:"matcher"`
	Hooks   []geminiHook `json:"hooks"`
}

type geminiHook struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Command string `json:"command"`
	// Timeout is in milliseconds.
	Timeout int               `json:"timeout"`
	Env     map[string]string `json:"env"`
}

// GeminiHookName is the name of the gate's hook in Gemini CLI's settings.
const GeminiHookName = "gate-operator"

// hookPath is the PATH the runtimes that look the hook's shell up on PATH are given.
const hookPath = "/usr/bin:/bin"

// geminiSettings renders the system settings.
func geminiSettings(opts Options) (string, error) {
	env := maps.Clone(PinnedEnv)
	env["PATH"] = hookPath
	// bash imports a function from a variable BASH_FUNC_<name>%% and runs it in place of the
	// builtin of that name: the registered command's builtins are pinned to no function.
	for _, builtin := range []string{"read", "printf", "[", "test", "exit"} {
		env["BASH_FUNC_"+builtin+"%%"] = ""
	}
	f := geminiSettingsFile{
		HooksConfig: geminiHooksConfig{Enabled: true},
		Hooks: map[string][]geminiMatcher{"BeforeTool": {{
			Matcher: "*",
			Hooks: []geminiHook{{
				Name: GeminiHookName, Type: "command", Command: registeredCommand(opts, geminiRuntime),
				Timeout: opts.HookTimeout * 1000, Env: env,
			}},
		}}},
		Privacy:   map[string]bool{"usageStatisticsEnabled": false},
		Telemetry: map[string]bool{"enabled": false},
		General:   map[string]bool{"disableAutoUpdate": true, "disableUpdateNag": true},
	}
	return marshal(f)
}
