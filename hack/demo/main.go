// Command demo is `make demo`: gate-operator end to end on a local control plane. It builds
// what is missing, starts etcd, kube-apiserver and kube-controller-manager, installs the CRDs,
// runs the manager, applies the samples, starts a fake Managed Agents API with a session that
// pauses on four calls, runs the confirmer as the SessionConfirmer's Deployment would, prints
// what happened, and removes everything it started, also on Ctrl-C.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/localenv"
)

const (
	ns       = "agents"
	apiKey   = "sk-ant-demo-key-not-a-real-one"
	agentID  = "agent_011CZkYpogX7uDKUyvBTophP"
	session  = "sesn_demo_01"
	whSecret = "whsec_ZGVtbyB3ZWJob29rIHNpZ25pbmcga2V5IQ=="
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	err := run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
	}
	fmt.Printf("\n(demo took %s; every process it started is stopped and its state removed)\n", time.Since(start).Round(time.Second))
	if err != nil {
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	env, err := localenv.Start(ctx, root, os.Stdout)
	if err != nil {
		return err
	}
	defer env.Stop()

	// api.anthropic.com and github.com resolve to documentation addresses through a local
	// stand-in: the machine has no DNS of its own to offer.
	nameserver, err := env.StartDNS(map[string]string{"api.anthropic.com": "192.0.2.10", "github.com": "192.0.2.20"})
	if err != nil {
		return err
	}
	env.Step("starting the manager")
	if err := env.StartManager("--nameserver=" + nameserver); err != nil {
		return err
	}

	env.Step("starting the fake Managed Agents API with session %s, paused on four calls", session)
	fake := anthropictest.New(apiKey)
	defer fake.Close()
	fake.AddSession(session, agentID,
		anthropictest.ToolUse{Name: "read", Input: map[string]any{"file_path": "/workspace/README.md"}, Permission: "ask", Evaluation: map[string]any{"type": "always_ask"}},
		anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "rm -rf / --no-preserve-root"}, Permission: "ask", Evaluation: map[string]any{"type": "always_ask"}},
		anthropictest.ToolUse{Name: "web_fetch", Input: map[string]any{"url": "https://docs.example.org/setup"}, Permission: "ask", Evaluation: map[string]any{"type": "always_ask"}},
		anthropictest.ToolUse{Type: "agent.mcp_tool_use", MCPServer: "deploy", Name: "release", Input: map[string]any{"service": "api", "environment": "production"}, Permission: "ask", Evaluation: map[string]any{"type": "always_ask"}},
	)

	env.Step("applying the samples to namespace %s", ns)
	if err := env.ApplySamples(ctx, localenv.Samples{Namespace: ns, APIKey: apiKey, WebhookKey: whSecret, BaseURL: fake.URL, AgentID: agentID, PollInterval: 2 * time.Second}); err != nil {
		return err
	}
	policy := &gatev1.HarnessAgentPolicy{}
	if err := localenv.Wait(ctx, 60*time.Second, func() (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "coding-agents"}, policy)
		return err == nil && meta.IsStatusConditionTrue(policy.Status.Conditions, gatev1.ConditionReady), nil
	}); err != nil {
		return fmt.Errorf("the policy did not become Ready: %w\n%s", err, conditions(policy.Status.Conditions))
	}

	env.Step("running the confirmer as the SessionConfirmer's Deployment would")
	conf, err := env.RunConfirmer(ctx, ns, "coding-agents")
	if err != nil {
		return err
	}
	if err := localenv.Wait(ctx, 60*time.Second, func() (bool, error) { return len(fake.Confirmations(session)) >= 3, nil }); err != nil {
		return fmt.Errorf("the confirmer did not answer: %w\n%s", err, env.Log("confirmer-coding-agents"))
	}
	return report(ctx, env, fake, conf)
}

func report(ctx context.Context, env *localenv.Env, fake *anthropictest.Server, conf *localenv.Confirmer) error {
	fmt.Printf("\nThe confirmer ran at http://%s (gate HTTP API, /readyz, /metrics).\n", conf.Addr)
	c := env.Client
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	section := func(title string) { fmt.Fprintf(w, "\n--- %s\n", title) }

	policy := &gatev1.HarnessAgentPolicy{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "coding-agents"}, policy); err != nil {
		return err
	}
	section("HarnessAgentPolicy agents/coding-agents")
	fmt.Fprint(w, conditions(policy.Status.Conditions))

	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: policy.Status.BootstrapConfigMap}, cm); err != nil {
		return err
	}
	section("bootstrap ConfigMap " + cm.Name)
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s\t%d bytes\n", k, len(cm.Data[k]))
	}
	fmt.Fprintf(w, "  bootstrap hash\t%s\n  snapshot digest\t%s\n", cm.Data["bootstrap-hash"], policy.Status.SnapshotDigest)

	np := &networkingv1.NetworkPolicy{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: policy.Status.NetworkPolicy}, np); err != nil {
		return err
	}
	section("egress NetworkPolicy " + np.Name)
	spec, _ := yaml.Marshal(np.Spec)
	fmt.Fprint(w, indent(string(spec)))

	d := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "coding-agents-confirmer"}, d); err != nil {
		return err
	}
	sc := &gatev1.SessionConfirmer{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "coding-agents"}, sc); err != nil {
		return err
	}
	section("SessionConfirmer agents/coding-agents and its Deployment " + d.Name)
	fmt.Fprint(w, conditions(sc.Status.Conditions))
	ctr := d.Spec.Template.Spec.Containers[0]
	fmt.Fprintf(w, "  replicas\t%d (the local control plane has no nodes, so no pod runs; the confirmer runs below as a local process with these arguments)\n", *d.Spec.Replicas)
	fmt.Fprintf(w, "  image\t%s\n  service\t%s\n", ctr.Image, sc.Status.ServiceURL)
	for _, a := range ctr.Args {
		fmt.Fprintf(w, "  \t%s\n", a)
	}

	section("decisions on session " + session + " (from the confirmer's audit log and the fake API)")
	answers := map[string]string{}
	for _, e := range fake.Confirmations(session) {
		a := fmt.Sprint(e["result"])
		if m, ok := e["deny_message"].(string); ok {
			a += ": " + m
		}
		answers[e["tool_use_id"].(string)] = a
	}
	for _, e := range fake.Events(session) {
		if e["type"] != "agent.tool_use" && e["type"] != "agent.mcp_tool_use" {
			continue
		}
		name := fmt.Sprint(e["name"])
		if s, ok := e["mcp_server_name"]; ok {
			name = fmt.Sprintf("mcp__%s__%s", s, name)
		}
		answer, ok := answers[e["id"].(string)]
		if !ok {
			answer = "held for a human (denied after the 15m deadline unless someone approves it)"
		}
		input, _ := json.Marshal(e["input"])
		fmt.Fprintf(w, "  %s\t%s\n  \t-> %s\n", name, input, answer)
	}
	fmt.Fprintln(w, "  audit lines:")
	for _, line := range strings.Split(env.Log("confirmer-coding-agents"), "\n") {
		if strings.Contains(line, `"msg":"decision"`) {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}

	section("where to look next")
	fmt.Fprintf(w, "  kubectl explain harnessagentpolicy.spec          the policy API\n")
	fmt.Fprintf(w, "  config/samples/                                  the two samples applied here\n")
	fmt.Fprintf(w, "  hack/local-cluster.sh start                      a control plane of your own to try kubectl on\n")
	fmt.Fprintf(w, "  go test ./test/e2e/                              this flow, with assertions\n")
	fmt.Fprintf(w, "  README.md, docs/gitops.md, docs/argocd.md        install, GitOps and Argo CD health\n")
	return w.Flush()
}

func conditions(cs []metav1.Condition) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "  %s=%s\t%s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}
