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
)

//go:embed messages.yaml
var messagesYAML string

// MessagesURL is the Messages API stand-in's Service (messages.yaml), the ANTHROPIC_BASE_URL of
// Claude Code in a sandbox pod; the host scripts the stand-in at the same address. Its fixed
// address is in the Service range's static band (messages.yaml).
const MessagesURL = "http://198.18.16.12"

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
