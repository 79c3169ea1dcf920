//go:build conformance

package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/google/geminitest"
	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/openai/responsestest"
	"github.com/intutic/gate-operator/internal/runtime/codex"
	"github.com/intutic/gate-operator/internal/runtime/gemini"
	"github.com/intutic/gate-operator/internal/webhook"
)

// otherAgentsInPod runs Codex and Gemini CLI in a sandbox pod that has nothing but the policy's
// label (docs/examples/sandbox-pod-labelled.yaml with the claude-agent image, which carries both):
// the webhook injects the rest, Codex's requirements at /etc/codex and Gemini CLI's system
// settings in /etc/gemini-cli among it, and every call of either is decided, by the pod's
// gate-agent sidecar. Each CLI runs as the image's user (1000) with a read-only root filesystem
// and the stand-ins of its model API behind the policy's egress; Codex with --sandbox
// danger-full-access, since its own sandbox needs user namespaces the restricted pod does not
// give (checked by the last Codex case).
func otherAgentsInPod(ctx context.Context, t *testing.T, env *localenv.Env) {
	pod := applyLabelledAgentPod(ctx, t, env, "other-agents-0")
	// The agents' own configuration, as a platform's agent image or harness would write it: the
	// stand-in as the model provider, the API key login, the deploy MCP server.
	codexConfig := fmt.Sprintf("model = \"gpt-5\"\nmodel_provider = \"stand\"\n\n[model_providers.stand]\nname = \"stand-in\"\nbase_url = %q\nwire_api = \"responses\"\nenv_key = \"STAND_KEY\"\n", localenv.ResponsesURL+"/v1")
	geminiSettings, _ := json.Marshal(geminiUserSettings)
	setup := "set -e; mkdir -p " + agentHome + "/.codex " + agentHome + "/.gemini; printf '%s' " + shq(codexConfig) + " > " + agentHome + "/.codex/config.toml; printf '%s' " + shq(string(geminiSettings)) + " > " + agentHome + "/.gemini/settings.json"
	out, code, err := env.Exec(ctx, podNamespace, pod, "agent", "", "/bin/busybox", "sh", "-c", setup)
	mustDo(t, err)
	if code != 0 {
		t.Fatalf("writing the agents' configuration: exit %d: %s", code, out)
	}
	// What the webhook mounted where each CLI reads its managed configuration.
	out, _, err = env.Exec(ctx, podNamespace, pod, "agent", "", "/bin/busybox", "stat", "-c", "%U %a %n", "/etc/gemini-cli", "/etc/gemini-cli/settings.json", "/etc/codex/requirements.toml")
	mustDo(t, err)
	t.Logf("managed configuration in %s:\n%s", pod, out)

	rm := "rm -rf /nonexistent-gate-conformance; touch /workspace/"
	for _, c := range []struct {
		name, marker string
		script       responsestest.Script
		sandbox      string
		check        func(res responsestest.ToolResult, marker bool) (bool, string)
	}{
		{name: "a blocked shell command is refused and does not run, decided by the gate-agent sidecar", marker: "codex-blocked",
			script: codexShell(rm + "codex-blocked"), sandbox: "danger-full-access", check: codexPodBlocked("destructive command on the root filesystem")},
		{name: "an allowed shell command runs", marker: "codex-allowed",
			script: codexShell("touch /workspace/codex-allowed"), sandbox: "danger-full-access",
			check: func(_ responsestest.ToolResult, marker bool) (bool, string) {
				return marker, "the allowed command did not run"
			}},
		{name: "an apply_patch outside the workspace (HOME) is refused", marker: "../home/agent/patched",
			script: codexShell("apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: " + agentHome + "/patched\n+x\n*** End Patch\nEOF"), sandbox: "danger-full-access",
			check: codexPodBlocked("agents write only inside /workspace")},
		// Codex's own sandbox (bubblewrap) needs a user namespace, which the restricted pod does not
		// give (observed: "bwrap: No permissions to create a new namespace"): the gate decides the
		// call, and then Codex's sandbox fails to start it (docs/sandbox-integration.md).
		{name: "with Codex's own sandbox (workspace-write), the gate decides an allowed command, and Codex's sandbox cannot start it", marker: "codex-own-sandbox",
			script: codexShell("touch /workspace/codex-own-sandbox"), sandbox: "workspace-write",
			check: func(res responsestest.ToolResult, marker bool) (bool, string) {
				t.Logf("Codex's own sandbox in the pod: the allowed command ran: %v; output %s", marker, res.Content)
				ok := res.Answered && !strings.Contains(res.Content, "blocked by PreToolUse hook") && !marker && strings.Contains(res.Content, "bwrap")
				return ok, fmt.Sprintf("ran %v, output %s", marker, res.Content)
			}},
	} {
		t.Run("Codex: "+c.name, func(t *testing.T) {
			mustDo(t, env.ResponsesScript(ctx, c.script))
			before := sidecarRecords(ctx, t, env, pod)
			command := []string{"/bin/busybox", "env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + agentHome, "CODEX_HOME=" + agentHome + "/.codex", "STAND_KEY=conformance",
				"/usr/local/bin/codex", "exec", "--skip-git-repo-check", "--sandbox", c.sandbox, "do the task"}
			runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			stdout, code, err := env.Exec(runCtx, podNamespace, pod, "agent", "", command...)
			mustDo(t, err)
			res, err := env.ResponsesToolResult(ctx)
			mustDo(t, err)
			_, mcode, err := env.Exec(ctx, podNamespace, pod, "agent", "", "/bin/test", "-e", "/workspace/"+c.marker)
			mustDo(t, err)
			t.Logf("codex exited %d; output %s; %s", code, res.Content, lastLines(stdout, 5))
			ok, detail := c.check(res, mcode == 0)
			if ok {
				ok, detail = decidedBy(sidecarRecords(ctx, t, env, pod)[len(before):], codex.Name)
			}
			record(t, codexPkg, "in a pod with only the policy label: "+c.name, ok, detail)
		})
	}

	for _, c := range []struct {
		name, marker string
		script       geminitest.Script
		check        func(res geminitest.ToolResult, marker bool) (bool, string)
	}{
		{name: "a blocked shell command is refused and does not run, decided by the gate-agent sidecar", marker: "gemini-blocked",
			script: geminitest.Script{Tool: "run_shell_command", Input: map[string]any{"command": rm + "gemini-blocked"}},
			check:  geminiPodBlocked("destructive command on the root filesystem")},
		{name: "an allowed shell command runs", marker: "gemini-allowed",
			script: geminitest.Script{Tool: "run_shell_command", Input: map[string]any{"command": "touch /workspace/gemini-allowed"}},
			check: func(_ geminitest.ToolResult, marker bool) (bool, string) {
				return marker, "the allowed command did not run"
			}},
		// Gemini CLI refuses a file tool's path outside its workspace (/workspace) itself, before
		// the hook; inside it, the gate refuses the runtime's own configuration.
		{name: "a write_file of workspace settings that would disable the gate's hook is refused", marker: ".gemini/settings.json",
			script: geminitest.Script{Tool: "write_file", Input: map[string]any{"file_path": "/workspace/.gemini/settings.json", "content": `{"hooksConfig":{"disabled":["gate-operator"]}}`}},
			check:  geminiPodBlocked("agents do not change their runtime's configuration")},
	} {
		t.Run("Gemini CLI: "+c.name, func(t *testing.T) {
			mustDo(t, env.GeminiScript(ctx, c.script))
			before := sidecarRecords(ctx, t, env, pod)
			command := []string{"/bin/busybox", "env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + agentHome, "GOOGLE_GEMINI_BASE_URL=" + localenv.GeminiURL, "GEMINI_API_KEY=conformance",
				"/usr/local/bin/node", "/usr/local/lib/gemini-cli/bundle/gemini.js", "-p", "do the task", "--yolo"}
			runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			stdout, code, err := env.Exec(runCtx, podNamespace, pod, "agent", "", command...)
			mustDo(t, err)
			res, err := env.GeminiToolResult(ctx)
			mustDo(t, err)
			_, mcode, err := env.Exec(ctx, podNamespace, pod, "agent", "", "/bin/test", "-e", "/workspace/"+c.marker)
			mustDo(t, err)
			t.Logf("gemini exited %d; functionResponse %s; %s", code, res.Content, lastLines(stdout, 5))
			ok, detail := c.check(res, mcode == 0)
			if ok {
				ok, detail = decidedBy(sidecarRecords(ctx, t, env, pod)[len(before):], gemini.Name)
			}
			record(t, geminiPkg, "in a pod with only the policy label: "+c.name, ok, detail)
		})
	}
}

func codexPodBlocked(reason string) func(responsestest.ToolResult, bool) (bool, string) {
	return func(res responsestest.ToolResult, marker bool) (bool, string) {
		return codexBlocked(reason)(codexRun{result: res, marker: marker})
	}
}

func geminiPodBlocked(reason string) func(geminitest.ToolResult, bool) (bool, string) {
	return func(res geminitest.ToolResult, marker bool) (bool, string) {
		return geminiBlocked(reason)(geminiRun{result: res, marker: marker})
	}
}

// sidecarRecords are the decision records in the pod's gate-agent log, oldest first.
func sidecarRecords(ctx context.Context, t *testing.T, env *localenv.Env, pod string) []decisionlog.Record {
	t.Helper()
	logs, err := env.Kubectl(ctx, "", "-n", podNamespace, "logs", pod, "-c", webhook.GateAgentContainerName)
	mustDo(t, err)
	var recs []decisionlog.Record
	for _, line := range strings.Split(logs, "\n") {
		var rec decisionlog.Record
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Schema == decisionlog.Schema {
			recs = append(recs, rec)
		}
	}
	return recs
}

// decidedBy passes when the sidecar decided at least one call of the runtime among recs, and
// gate-hook none (the client asked the sidecar, which answered).
func decidedBy(recs []decisionlog.Record, runtime string) (bool, string) {
	var got []string
	for _, r := range recs {
		got = append(got, r.Surface+"/"+r.Runtime+"/"+r.Tool)
		if r.Surface == decisionlog.SurfaceHookFallback {
			return false, "gate-hook decided a call the sidecar should have: " + strings.Join(got, ", ")
		}
	}
	if !slices.ContainsFunc(recs, func(r decisionlog.Record) bool {
		return r.Surface == decisionlog.SurfaceHookSidecar && r.Runtime == runtime
	}) {
		return false, "the gate-agent sidecar recorded no call of " + runtime + " (records: " + strings.Join(got, ", ") + ")"
	}
	return true, ""
}

// lastLines is the last n lines of s, for a log.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// applyLabelledAgentPod starts docs/examples/sandbox-pod-labelled.yaml with the claude-agent
// image: the policy label and the agent container, nothing of the gate's. Like applyClaudePod,
// it gives the agent a read-only root filesystem with writable emptyDirs for HOME, /workspace and
// /tmp.
func applyLabelledAgentPod(ctx context.Context, t *testing.T, env *localenv.Env, name string) string {
	t.Helper()
	manifest, err := env.ExampleManifest("sandbox-pod-labelled.yaml", localenv.ClaudeAgentImage)
	mustDo(t, err)
	pod := &corev1.Pod{}
	mustDo(t, yaml.UnmarshalStrict([]byte(manifest), pod))
	pod.Name, pod.Namespace = name, podNamespace
	agent := &pod.Spec.Containers[0]
	agent.ImagePullPolicy = corev1.PullNever
	agent.WorkingDir = "/workspace"
	readOnly := true
	agent.SecurityContext.ReadOnlyRootFilesystem = &readOnly
	addEmptyDirs(pod, agent, map[string]string{"home": agentHome, "workspace": "/workspace", "tmp": "/tmp"})
	b, err := yaml.Marshal(pod)
	mustDo(t, err)
	got, err := env.ApplyPod(ctx, podNamespace, string(b))
	mustDo(t, err)
	return got
}
