// Command demo is `make demo`: gate-operator where users run it. It starts the local cluster
// with a real node (building what is missing), installs gate-operator with its own Helm chart
// from the images `make images` builds, runs the fake Managed Agents API in a pod, applies the
// samples, and shows the two manager replicas and two confirmer replicas Running, the confirmer
// answering the fake session through the in-cluster Service, a governed sandbox pod whose hook
// blocks and allows calls, and that pod's egress on real packets. It removes everything it
// started at the end and on Ctrl-C; with DEMO_KEEP set it keeps the cluster up after its report
// until Ctrl-C.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/controllers"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/confirm/membership"
	"github.com/intutic/gate-operator/internal/localenv"
)

const (
	ns       = "agents"
	apiKey   = "sk-ant-demo-key-not-a-real-one"
	agentID  = "agent_011CZkYpogX7uDKUyvBTophP"
	session  = "sesn_demo_01"
	whSecret = "whsec_ZGVtbyB3ZWJob29rIHNpZ25pbmcga2V5IQ=="
)

// ask is the permission of every scripted call, and alwaysAsk its evaluated permission of every scripted call: the agent's own configuration
// would ask, so the confirmer decides.
var alwaysAsk = map[string]any{"type": "always_ask"}

const ask = "ask"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	err := run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
	}
	fmt.Printf("\n(demo took %s; the cluster, its node and everything they started are removed)\n", time.Since(start).Round(time.Second))
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
	if err := env.InstallChart(ctx); err != nil {
		return err
	}
	if err := env.DeployFakes(ctx, apiKey); err != nil {
		return err
	}
	env.Step("scripting session %s on the fake: it pauses on five calls", session)
	if _, err := env.FakeSession(ctx, session, agentID,
		anthropictest.ToolUse{Name: "read", Input: map[string]any{"file_path": "/workspace/README.md"}, Permission: ask, Evaluation: alwaysAsk},
		anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "rm -rf / --no-preserve-root"}, Permission: ask, Evaluation: alwaysAsk},
		anthropictest.ToolUse{Name: "web_fetch", Input: map[string]any{"url": "https://docs.example.org/setup"}, Permission: ask, Evaluation: alwaysAsk},
		anthropictest.ToolUse{Name: "web_fetch", Input: map[string]any{"url": "https://downloads.example.net/tool-v2.tar.gz"}, Permission: ask, Evaluation: alwaysAsk},
		anthropictest.ToolUse{Type: "agent.mcp_tool_use", MCPServer: "deploy", Name: "release", Input: map[string]any{"service": "api", "environment": "production"}, Permission: ask, Evaluation: alwaysAsk},
	); err != nil {
		return err
	}
	// The agent asks before each of its tools' calls, as the events above say (the posture Report
	// reads it and passes it).
	if err := env.FakeAgent(ctx, anthropictest.Agent{ID: agentID, Name: "coding-agent", Tools: []anthropictest.Toolset{
		{Default: "always_ask"}, {MCPServer: "deploy", Default: "always_ask"}}}); err != nil {
		return err
	}
	env.Step("applying the samples to namespace %s", ns)
	if err := env.ApplySamples(ctx, localenv.Samples{Namespace: ns, APIKey: apiKey, WebhookKey: whSecret, BaseURL: localenv.FakeBaseURL, AgentID: agentID, PollInterval: 2 * time.Second}); err != nil {
		return err
	}
	policy := &gatev1.HarnessAgentPolicy{}
	if err := localenv.Wait(ctx, 60*time.Second, func() (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "coding-agents"}, policy)
		return err == nil && meta.IsStatusConditionTrue(policy.Status.Conditions, gatev1.ConditionReady), nil
	}); err != nil {
		return fmt.Errorf("the policy did not become Ready: %w\n%s", err, conditions(policy.Status.Conditions))
	}
	env.Step("waiting for the SessionConfirmer's Deployment: two replicas Available, one leading")
	if _, err := env.Kubectl(ctx, "", "-n", ns, "rollout", "status", "deployment/coding-agents-confirmer", "--timeout=120s"); err != nil {
		return err
	}
	if err := localenv.Wait(ctx, 60*time.Second, func() (bool, error) {
		got, err := env.FakeConfirmations(ctx, session)
		return err == nil && len(got) >= 3, nil
	}); err != nil {
		logs, _ := env.Kubectl(ctx, "", "-n", ns, "logs", "deployment/coding-agents-confirmer", "--tail=20")
		return fmt.Errorf("the confirmer did not answer: %w\n%s", err, logs)
	}
	env.Step("creating the sandbox pod of docs/examples/sandbox-pod.yaml (agent image: the testbed)")
	pod, err := env.ApplySandbox(ctx, ns)
	if err != nil {
		return err
	}
	if err := approvals(ctx, env); err != nil {
		return err
	}
	if err := report(ctx, env, pod); err != nil {
		return err
	}
	if os.Getenv("DEMO_KEEP") != "" {
		fmt.Printf("\nDEMO_KEEP is set: the cluster stays up until Ctrl-C. In another terminal:\n  export KUBECONFIG=%s PATH=%s/bin:$PATH\n", env.Kubeconfig, env.Dir)
		<-ctx.Done()
	}
	return nil
}

// approvals shows the human lane: the two held web fetches are ToolApprovals; alice, bound to
// the ClusterRole gate-operator-approver in the namespace, approves the first with the kubectl
// plugin, and mallory, who may write their status but lacks the verb approve, is refused by the
// admission webhook for the second, which stays pending until its deadline denies it.
func approvals(ctx context.Context, env *localenv.Env) error {
	c := env.Client
	env.Step("binding user alice to the ClusterRole gate-operator-approver in %s; mallory may only read ToolApprovals and write their status", ns)
	if err := c.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-approves-agent-calls"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "gate-operator-approver"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}},
	}); err != nil {
		return err
	}
	if err := localenv.GrantStatusWriter(ctx, c, ns, "mallory"); err != nil {
		return err
	}
	var held []gatev1.ToolApproval
	if err := localenv.Wait(ctx, 60*time.Second, func() (bool, error) {
		list := &gatev1.ToolApprovalList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		held = held[:0]
		for _, a := range list.Items {
			if a.Spec.SessionID == session {
				held = append(held, a)
			}
		}
		return len(held) == 2, nil
	}); err != nil {
		return fmt.Errorf("the held web fetches did not become ToolApprovals: %w", err)
	}
	// The fake numbers its events in order: the docs fetch paused first.
	slices.SortFunc(held, func(a, b gatev1.ToolApproval) int { return strings.Compare(a.Spec.ToolUseID, b.Spec.ToolUseID) })
	docs, download := held[0], held[1]
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\n--- human approvals (ToolApproval objects, answered with the kubectl plugin cmd/kubectl-gate)\n")
	show := func(args ...string) {
		out, err := env.Gate(ctx, args...)
		fmt.Fprintf(w, "  $ kubectl gate %s\n", strings.Join(args, " "))
		if err != nil {
			out = err.Error()
		}
		fmt.Fprint(w, indent(out))
	}
	show("pending", "-n", ns)
	show("approve", docs.Name, "-n", ns, "--as", "alice", "--message", "docs fetch for the setup task")
	show("approve", download.Name, "-n", ns, "--as", "mallory")
	if err := localenv.Wait(ctx, 60*time.Second, func() (bool, error) {
		got, err := env.FakeConfirmations(ctx, session)
		if err != nil {
			return false, err
		}
		for _, e := range got {
			if e["tool_use_id"] == docs.Spec.ToolUseID {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return fmt.Errorf("the approved call was not confirmed: %w", err)
	}
	out, err := env.Kubectl(ctx, "", "-n", ns, "get", "toolapprovals", "-o", "wide")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  $ kubectl get toolapprovals -n %s\n%s", ns, indent(out))
	got := &gatev1.ToolApproval{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(&docs), got); err != nil {
		return err
	}
	if d := got.Status.Decision; d != nil {
		fmt.Fprintf(w, "  %s: %s by %s (groups %s) at %s: %q\n", got.Name, got.Status.State, d.User, strings.Join(d.Groups, ","), d.Time, d.Message)
	}
	return w.Flush()
}

func report(ctx context.Context, env *localenv.Env, sandbox string) error {
	c := env.Client
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	section := func(title string) { fmt.Fprintf(w, "\n--- %s\n", title) }

	section("installed from the local OCI registry (" + env.Registry() + "), images by digest")
	if err := installSource(ctx, env, w); err != nil {
		return err
	}

	section("pods")
	pods, err := env.Kubectl(ctx, "", "get", "pods", "-A", "-o", "wide")
	if err != nil {
		return err
	}
	fmt.Fprint(w, indent(pods))

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
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "  bootstrap ConfigMap %s:\t%s\n", cm.Name, strings.Join(keys, ", "))
	fmt.Fprintf(w, "  snapshot digest\t%s\n", policy.Status.SnapshotDigest)

	section("kubectl apply of a policy whose rule does not compile (the manager's validating webhook)")
	const broken = `
apiVersion: gate.intutic.io/v1alpha1
kind: HarnessAgentPolicy
metadata: {name: broken, namespace: agents}
spec:
  podSelector: {matchLabels: {app: none}}
  rules:
  - {name: typo, tools: [bash], when: 'inptu.command == "x"', action: Block, reason: typo}
`
	if _, err := env.Kubectl(ctx, broken, "apply", "-f", "-"); err != nil {
		fmt.Fprint(w, indent(strings.TrimPrefix(err.Error(), "kubectl apply -f -: exit status 1: ")))
	} else {
		fmt.Fprintln(w, "  accepted (the webhook did not refuse it)")
	}

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
	fmt.Fprintf(w, "  replicas\t%d desired, %d available\n  service\t%s\n", *d.Spec.Replicas, d.Status.AvailableReplicas, sc.Status.ServiceURL)
	if members, err := leaseMembers(ctx, c, ns, d.Name); err == nil {
		fmt.Fprintf(w, "  members\t%s (Lease %s/%s: the replicas share the sessions)\n", members, ns, d.Name)
	}

	section("decisions on session " + session + " (the fake API's record, answered by the confirmer pods)")
	confirmations, err := env.FakeConfirmations(ctx, session)
	if err != nil {
		return err
	}
	for _, e := range confirmations {
		a := fmt.Sprint(e["result"])
		if m, ok := e["deny_message"].(string); ok {
			a += ": " + m
		}
		fmt.Fprintf(w, "  %s\t-> %s\n", e["tool_use_id"], a)
	}
	fmt.Fprintf(w, "  (%d of 5 answered; the fetch from downloads.example.net is still held for a human: its ToolApproval denies it at the 15m deadline unless someone allowed to approve does)\n", len(confirmations))
	section("hook verdicts inside sandbox pod " + ns + "/" + sandbox + " (kubectl exec, through /opt/intutic/hooks/gate-hook.sh)")
	for _, call := range []struct{ tool, input string }{
		{"Bash", `{"command":"rm -rf / --no-preserve-root"}`},
		{"Write", `{"file_path":"/etc/passwd","content":"x"}`},
		{"Read", `{"file_path":"/workspace/README.md"}`},
	} {
		out, code, err := env.Hook(ctx, ns, sandbox, "agent", call.tool, call.input)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %s %s\t-> exit %d %s\n", call.tool, call.input, code, verdict(out, code))
	}
	section("the decision trail: kubectl gate " + strings.Join(trailArgs, " ") + " (the confirmer replicas' records and the sandbox pod's gate-agent's)")
	if err := decisionTrail(ctx, env, w, sandbox); err != nil {
		return err
	}
	section("posture of namespace " + ns + ": its Report (openreports.io/v1alpha1 " + controllers.ReportName + ", kept by the manager)")
	if err := postureReport(ctx, c, w); err != nil {
		return err
	}

	section("egress of the sandbox pod on real packets (NetworkPolicy " + policy.Status.NetworkPolicy + ", enforced by kube-router)")
	dests := []struct{ label, addr string }{
		{"api.anthropic.com:443 (allowedHosts, port 443)", "api.anthropic.com:443"},
		{"github.com:443 (allowedHosts)", "github.com:443"},
		{"api.anthropic.com:80 (allowed host, other port)", "api.anthropic.com:80"},
		{"unlisted.example.org:443 (not listed)", "unlisted.example.org:443"},
		{"Kubernetes API Service " + localenv.KubernetesService, localenv.KubernetesService},
		{"fake Managed Agents API Service", "managed-agents.fakes.svc.cluster.local:80"},
	}
	addrs := make([]string, len(dests))
	for i, d := range dests {
		addrs[i] = d.addr
	}
	res, err := env.Probe(ctx, ns, sandbox, "agent", addrs...)
	if err != nil {
		return err
	}
	for _, d := range dests {
		fmt.Fprintf(w, "  %s\t%s\n", d.label, res[d.addr])
	}

	section("where to look next")
	fmt.Fprintf(w, "  hack/local-cluster.sh start --node; helm install   the same cluster by hand (README: \"Try it on the local cluster\")\n")
	fmt.Fprintf(w, "  kubectl explain harnessagentpolicy.spec           the policy API\n")
	fmt.Fprintf(w, "  go test ./test/e2e/                               this flow, with assertions\n")
	fmt.Fprintf(w, "  README.md, docs/sandbox-integration.md            install and sandbox pods\n")
	return w.Flush()
}

// verdict reads the hook's answer: a deny prints its reason, an allow prints nothing.
func verdict(out string, code int) string {
	var v struct {
		HookSpecificOutput struct {
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if json.Unmarshal([]byte(out), &v) == nil && v.HookSpecificOutput.PermissionDecision != "" {
		return v.HookSpecificOutput.PermissionDecision + ": " + v.HookSpecificOutput.PermissionDecisionReason
	}
	if code == 0 {
		return "allow"
	}
	return strings.TrimSpace(out)
}

// leaseMembers lists the confirmer replicas recorded on their Lease.
func leaseMembers(ctx context.Context, c client.Client, namespace, name string) (string, error) {
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, lease); err != nil {
		return "", err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal([]byte(lease.Annotations[membership.Annotation]), &members); err != nil {
		return "", err
	}
	return strings.Join(slices.Sorted(maps.Keys(members)), ", "), nil
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

// installSource prints where the chart and the images came from: the chart's OCI reference,
// version and digest, each image index the node's start pushed, and the image each container of
// the operator's and the demo namespace's pods runs from gate-operator's repositories, as the
// kubelet reports it (the digest it pulled).
func installSource(ctx context.Context, env *localenv.Env, w io.Writer) error {
	fmt.Fprintf(w, "  chart\t%s --version %s (%s)\n", env.Chart.Ref, env.Chart.Version, env.Chart.Digest)
	digests, err := env.ImageDigests()
	if err != nil {
		return err
	}
	for _, ref := range slices.Sorted(maps.Keys(digests)) {
		fmt.Fprintf(w, "  pushed\t%s %s (linux/amd64 and linux/arm64)\n", ref, digests[ref])
	}
	verified, err := env.VerifyImages(ctx)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, verified)
	}
	for line := range strings.Lines(verified) {
		fmt.Fprintf(w, "  cosign\t%s", line)
	}
	for _, where := range []string{localenv.OperatorNamespace, ns} {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(where)); err != nil {
			return err
		}
		for _, p := range pods.Items {
			for _, st := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
				if strings.Contains(st.ImageID, "intutic/") {
					fmt.Fprintf(w, "  %s/%s %s\t%s\n", p.Namespace, p.Name, st.Name, st.ImageID)
				}
			}
		}
	}
	return nil
}

// postureReport prints the namespace's Report: its summary and each result. The manager writes it
// a moment after the pods it lists are admitted, so the sandbox pod's is waited for.
func postureReport(ctx context.Context, c client.Client, w io.Writer) error {
	r := &reportsv1alpha1.Report{}
	err := localenv.Wait(ctx, 30*time.Second, func() (bool, error) {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllers.ReportName}, r)
		return err == nil && slices.ContainsFunc(r.Results, func(res reportsv1alpha1.ReportResult) bool { return res.Rule == "pod-governed" }), nil
	})
	if err != nil {
		return fmt.Errorf("the Report of namespace %s: %w", ns, err)
	}
	fmt.Fprintf(w, "  summary\tpass %d, fail %d, warn %d\n", r.Summary.Pass, r.Summary.Fail, r.Summary.Warn)
	for _, res := range r.Results {
		fmt.Fprintf(w, "  %s\t%s %s: %s\n", res.Result, res.Policy, res.Rule, res.Description)
	}
	return nil
}

// trailArgs are the arguments of the demo's kubectl gate decisions.
var trailArgs = []string{"decisions", "-n", ns, "--since", "10m"}

// decisionTrail prints the decision trail of the namespace as kubectl gate decisions reads it
// from the pods' logs: the confirmer replicas' Managed Agents decisions and the hook calls the
// sandbox pod's gate-agent sidecar decided, in time order. A sidecar writes its record just
// after its answer, so the hook's last call is waited for.
func decisionTrail(ctx context.Context, env *localenv.Env, w io.Writer, sandbox string) error {
	var out string
	err := localenv.Wait(ctx, 30*time.Second, func() (bool, error) {
		var err error
		out, err = env.Gate(ctx, trailArgs...)
		return err == nil && strings.Contains(out, "pod "+sandbox) && strings.Contains(out, "Read") && strings.Contains(out, "session "), nil
	})
	if out == "" {
		return fmt.Errorf("kubectl gate decisions printed nothing: %w", err)
	}
	fmt.Fprint(w, indent(out))
	return nil
}
