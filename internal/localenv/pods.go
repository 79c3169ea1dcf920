package localenv

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
)

//go:embed fakes.yaml
var fakesYAML string

// FakeBaseURL is the fake Managed Agents API's address inside the cluster, a name the
// cluster's DNS stand-in resolves to the fixed ClusterIP of fakes.yaml's Service; the host
// reaches it at FakeHostURL (kube-proxy routes the machine's own traffic to ClusterIPs too).
const (
	FakeBaseURL = "http://managed-agents.fakes.svc.cluster.local"
	FakeHostURL = "http://198.18.16.11"
)

// DeployFakes runs the fake Managed Agents API as a pod behind its Service, accepting apiKey.
func (e *Env) DeployFakes(ctx context.Context, apiKey string) error {
	e.Step("starting the fake Managed Agents API in the cluster (namespace fakes, Service managed-agents)")
	if _, err := e.Kubectl(ctx, fakesYAML, "apply", "-f", "-"); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fakes", Name: "anthropic"}, Data: map[string][]byte{"api-key": []byte(apiKey)}}
	if err := e.Client.Create(ctx, secret); err != nil {
		return err
	}
	if _, err := e.Kubectl(ctx, "", "-n", "fakes", "rollout", "status", "deployment/managed-agents", "--timeout=90s"); err != nil {
		return err
	}
	// Ready is not yet routed: wait until kube-proxy sends the Service's traffic to the pod.
	return Wait(ctx, 60*time.Second, func() (bool, error) {
		hc := http.Client{Timeout: 2 * time.Second}
		resp, err := hc.Get(FakeHostURL + "/_fake/sessions/none/confirmations")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return true, nil
	})
}

// FakeSession adds a session of agentID with calls to the fake (or calls to an existing
// session) and returns the calls' tool-use ids.
func (e *Env) FakeSession(ctx context.Context, id, agentID string, calls ...anthropictest.ToolUse) ([]string, error) {
	body, err := json.Marshal(map[string]any{"AgentID": agentID, "Calls": calls})
	if err != nil {
		return nil, err
	}
	var out struct{ ToolUseIDs []string }
	if err := hostCall(ctx, FakeHostURL, http.MethodPost, "/_fake/sessions/"+id, body, &out); err != nil {
		return nil, err
	}
	return out.ToolUseIDs, nil
}

// FakeAgent adds an agent to the fake (or replaces it), which GET /v1/agents/{id} answers.
func (e *Env) FakeAgent(ctx context.Context, agent anthropictest.Agent) error {
	body, err := json.Marshal(agent)
	if err != nil {
		return err
	}
	return hostCall(ctx, FakeHostURL, http.MethodPost, "/_fake/agents", body, nil)
}

// FakeConfirmations returns the user.tool_confirmation events the fake's session received.
func (e *Env) FakeConfirmations(ctx context.Context, id string) ([]map[string]any, error) {
	var out []map[string]any
	err := hostCall(ctx, FakeHostURL, http.MethodGet, "/_fake/sessions/"+id+"/confirmations", nil, &out)
	return out, err
}

// hostCall calls a fake in the cluster from the host at base (a Service's address) and decodes
// its JSON answer into out, unless out is nil.
func hostCall(ctx context.Context, base, method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// ApplySandbox creates the sandbox pod of docs/examples/sandbox-pod.yaml in namespace, as
// written there except its agent image, which is the testbed image (a shell and the probe),
// and waits until it is Ready. It returns the pod's name.
func (e *Env) ApplySandbox(ctx context.Context, namespace string) (string, error) {
	manifest, err := e.SandboxManifest(TestbedImage)
	if err != nil {
		return "", err
	}
	return e.ApplyPod(ctx, namespace, manifest)
}

// Exec runs command in a container of a pod with stdin and returns its standard output and
// exit status (kubectl exec passes the command's status through).
func (e *Env) Exec(ctx context.Context, namespace, pod, container, stdin string, command ...string) (string, int, error) {
	args := append([]string{"-n", namespace, "exec", "-i", pod, "-c", container, "--"}, command...)
	out, err := e.Kubectl(ctx, stdin, args...)
	if err == nil {
		return out, 0, nil
	}
	var code int
	if _, scanErr := fmt.Sscanf(errorTail(err), "command terminated with exit code %d", &code); scanErr == nil {
		return out, code, nil
	}
	return out, -1, err
}

func errorTail(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, "command terminated"); i >= 0 {
		return s[i:]
	}
	return s
}

// Probe tries a TCP connection from a pod to each destination (testbed probe) and returns
// "open" or "blocked" per destination.
func (e *Env) Probe(ctx context.Context, namespace, pod, container string, dests ...string) (map[string]string, error) {
	out, _, err := e.Exec(ctx, namespace, pod, container, "", append([]string{"/testbed", "probe", "-timeout", "2s"}, dests...)...)
	if err != nil {
		return nil, err
	}
	res := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if dst, state, ok := strings.Cut(line, " "); ok {
			res[dst] = state
		}
	}
	for _, d := range dests {
		if res[d] == "" {
			return nil, fmt.Errorf("probe from %s/%s: no answer for %s in %q", namespace, pod, d, out)
		}
	}
	return res, nil
}

// Hook runs a PreToolUse payload for tool with input (JSON) in a container of a sandbox pod as
// Claude Code runs it: the command the pod's managed settings register, under /bin/sh -c. It
// returns the hook's standard output and exit status.
func (e *Env) Hook(ctx context.Context, namespace, pod, container, tool, input string) (string, int, error) {
	settings, code, err := e.Exec(ctx, namespace, pod, container, "", "/bin/cat", "/etc/claude-code/managed-settings.json")
	if err != nil || code != 0 {
		return "", code, fmt.Errorf("reading the managed settings in %s/%s: exit %d: %v", namespace, pod, code, err)
	}
	var s struct {
		Hooks struct {
			PreToolUse []struct {
				Hooks []struct{ Command string }
			}
		}
	}
	if err := json.Unmarshal([]byte(settings), &s); err != nil || len(s.Hooks.PreToolUse) != 1 || len(s.Hooks.PreToolUse[0].Hooks) != 1 {
		return "", -1, fmt.Errorf("the managed settings in %s/%s register no single PreToolUse hook: %v", namespace, pod, err)
	}
	payload := fmt.Sprintf(`{"session_id":"local","transcript_path":"/tmp/t.jsonl","cwd":"/workspace","hook_event_name":"PreToolUse","tool_name":%q,"tool_input":%s}`, tool, input)
	return e.Exec(ctx, namespace, pod, container, payload, "/bin/sh", "-c", s.Hooks.PreToolUse[0].Hooks[0].Command)
}
