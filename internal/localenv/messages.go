package localenv

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/intutic/gate-operator/internal/anthropic/messagestest"
	"github.com/intutic/gate-operator/internal/google/geminitest"
	"github.com/intutic/gate-operator/internal/openai/responsestest"
)

//go:embed messages.yaml
var messagesYAML string

// MessagesURL is the Messages API stand-in's Service (messages.yaml), the ANTHROPIC_BASE_URL of
// Claude Code in a sandbox pod; the host scripts the stand-in at the same address. Its fixed
// address is in the Service range's static band (messages.yaml).
const MessagesURL = "http://198.18.16.12"

// ResponsesURL and GeminiURL are the Responses API's and the Gemini API's stand-ins at the same
// Service: the base URLs of Codex and Gemini CLI in a sandbox pod.
const (
	ResponsesURL = MessagesURL + ":81"
	GeminiURL    = MessagesURL + ":82"
)

// StandInPorts are the stand-ins' container ports, which a sandbox's egress policy must allow
// (NetworkPolicies see the pod's port, after kube-proxy).
var StandInPorts = []int32{8080, 8081, 8082}

// DeployMessagesStandIn runs the scripted Messages API stand-in as a pod behind its Service and
// returns the pod's address. Egress NetworkPolicies see a connection to the Service after
// kube-proxy has translated it, so a policy that lets a sandbox reach the stand-in names this
// address and the container port 8080, not the Service's.
func (e *Env) DeployMessagesStandIn(ctx context.Context) (string, error) {
	e.Step("starting the Messages API stand-in in the cluster (namespace fakes, Service messages-api at %s)", MessagesURL)
	if _, err := e.Kubectl(ctx, messagesYAML, "apply", "-f", "-"); err != nil {
		return "", err
	}
	if _, err := e.Kubectl(ctx, "", "-n", "fakes", "rollout", "status", "deployment/messages-api", "--timeout=90s"); err != nil {
		return "", err
	}
	out, err := e.Kubectl(ctx, "", "-n", "fakes", "get", "pods", "-l", "app=messages-api", "-o", "jsonpath={.items[*].status.podIP}")
	if err != nil {
		return "", err
	}
	ip := strings.TrimSpace(out)
	if ip == "" || strings.Contains(ip, " ") {
		return "", fmt.Errorf("want one messages-api pod with an address, got %q", ip)
	}
	// Ready is not yet routed: wait until kube-proxy sends the Service's traffic to the pod.
	return ip, Wait(ctx, 60*time.Second, func() (bool, error) {
		_, err := e.MessagesToolResult(ctx)
		return err == nil, nil
	})
}

// MessagesScript arms the stand-in: the model's next turn calls the script's tool, and the
// tool_results received so far are forgotten.
func (e *Env) MessagesScript(ctx context.Context, s messagestest.Script) error {
	body, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return hostCall(ctx, MessagesURL, http.MethodPut, messagestest.ScriptPath, body, nil)
}

// MessagesToolResult returns the last tool_result the stand-in received under its script.
func (e *Env) MessagesToolResult(ctx context.Context) (messagestest.ToolResult, error) {
	var r messagestest.ToolResult
	err := hostCall(ctx, MessagesURL, http.MethodGet, messagestest.ToolResultPath, nil, &r)
	return r, err
}

// ResponsesScript arms the Responses API stand-in.
func (e *Env) ResponsesScript(ctx context.Context, s responsestest.Script) error {
	body, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return hostCall(ctx, ResponsesURL, http.MethodPut, responsestest.ScriptPath, body, nil)
}

// ResponsesToolResult returns the last tool output the Responses API stand-in received.
func (e *Env) ResponsesToolResult(ctx context.Context) (responsestest.ToolResult, error) {
	var r responsestest.ToolResult
	err := hostCall(ctx, ResponsesURL, http.MethodGet, responsestest.ToolResultPath, nil, &r)
	return r, err
}

// GeminiScript arms the Gemini API stand-in.
func (e *Env) GeminiScript(ctx context.Context, s geminitest.Script) error {
	body, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return hostCall(ctx, GeminiURL, http.MethodPut, geminitest.ScriptPath, body, nil)
}

// GeminiToolResult returns the last functionResponse the Gemini API stand-in received.
func (e *Env) GeminiToolResult(ctx context.Context) (geminitest.ToolResult, error) {
	var r geminitest.ToolResult
	err := hostCall(ctx, GeminiURL, http.MethodGet, geminitest.ToolResultPath, nil, &r)
	return r, err
}
