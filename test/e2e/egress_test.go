package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/localenv"
)

// egressNS holds the egress table's pods and policies.
const egressNS = "egress"

// egressObjects: a target pod listening on 8080 and 53 ("another pod"), a pod no policy
// selects, one pod under each of three namespace policies, and one that only the cluster policy
// selects (governed by the namespace's baseline, whose NetworkPolicy is the ceiling itself). The allow-list policy allows one host by
// name (resolved through the cluster's DNS stand-in pod), a /32, and a /25 with a /32 carved
// out of it (the stand-in for a metadata address: never probe a real one). The cluster policy
// egress-ceiling (selecting the pods with a role label) bounds every namespace policy of the
// namespace to api.anthropic.com,
// 198.18.40.30/32 and 198.18.41.0/24 on 443: allow-list stays inside it, beyond-ceiling lists
// github.com and port 8443 beside what the ceiling allows. The outside hosts (hack/lib/node.sh)
// listen on 80, 443 and 8443 at every address probed.
const egressObjects = `
apiVersion: v1
kind: Namespace
metadata: {name: egress}
---
apiVersion: gate.intutic.io/v1alpha1
kind: HarnessAgentPolicy
metadata: {name: deny-all, namespace: egress}
spec:
  podSelector: {matchLabels: {role: deny-all}}
  rules:
  - {name: no-root-rm, tools: [bash], when: 'input.command.contains("rm -rf /")', action: Block, reason: destructive}
---
apiVersion: gate.intutic.io/v1alpha1
kind: HarnessAgentPolicy
metadata: {name: allow-list, namespace: egress}
spec:
  podSelector: {matchLabels: {role: allow-list}}
  rules:
  - {name: no-root-rm, tools: [bash], when: 'input.command.contains("rm -rf /")', action: Block, reason: destructive}
  egress:
    allowedHosts: [api.anthropic.com]
    allowedCIDRs: [198.18.41.10/32, 198.18.41.128/25]
    deniedCIDRs: [198.18.41.254/32]
    ports: [443]
---
apiVersion: gate.intutic.io/v1alpha1
kind: ClusterHarnessAgentPolicy
metadata: {name: egress-ceiling}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: egress}}
  podSelector: {matchExpressions: [{key: role, operator: Exists}]}
  egress:
    allowedHosts: [api.anthropic.com]
    allowedCIDRs: [198.18.40.30/32, 198.18.41.0/24]
    ports: [443]
---
apiVersion: gate.intutic.io/v1alpha1
kind: HarnessAgentPolicy
metadata: {name: beyond-ceiling, namespace: egress}
spec:
  podSelector: {matchLabels: {role: beyond-ceiling}}
  rules:
  - {name: no-root-rm, tools: [bash], when: 'input.command.contains("rm -rf /")', action: Block, reason: destructive}
  egress:
    allowedHosts: [api.anthropic.com, github.com]
    allowedCIDRs: [198.18.41.10/32]
    ports: [443, 8443]
`

func egressPod(name, role string, args ...string) string {
	labels := ""
	if role != "" {
		labels = fmt.Sprintf("\n  labels: {role: %s}", role)
	}
	return fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: egress%s
spec:
  automountServiceAccountToken: false
  securityContext:
    runAsNonRoot: true
    runAsUser: 1000
    sysctls: [{name: net.ipv4.ip_unprivileged_port_start, value: "53"}]
  containers:
  - name: probe
    image: %s
    imagePullPolicy: Never
    args: ["%s"]
`, name, labels, localenv.TestbedImage, strings.Join(args, `", "`))
}

// egressColumn is one destination of the table.
type egressColumn struct{ name, addr string }

// testEgressTable probes TCP destinations from each pod, prints the table and asserts it.
func testEgressTable(ctx context.Context, t *testing.T, env *localenv.Env) {
	manifest := egressObjects +
		egressPod("target", "", "listen", "8080", "53") +
		egressPod("unselected", "", "pause") +
		egressPod("deny-all", "deny-all", "pause") +
		egressPod("allow-list", "allow-list", "pause") +
		egressPod("beyond-ceiling", "beyond-ceiling", "pause") +
		egressPod("cluster-only", "cluster-only", "pause")
	if _, err := env.Kubectl(ctx, manifest, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	// The ceiling goes with this table: later tests use the namespace's pods unbounded.
	defer func() {
		if _, err := env.Kubectl(ctx, "", "delete", "clusterharnessagentpolicy", "egress-ceiling"); err != nil {
			t.Error(err)
		}
	}()
	if _, err := env.Kubectl(ctx, "", "-n", egressNS, "wait", "--for=condition=Ready", "pod", "--all", "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	c := env.Client
	for _, name := range []string{"deny-all", "allow-list"} {
		wait(t, "policy "+name+" is Ready with egress enforced", func() bool {
			p := &gatev1.HarnessAgentPolicy{}
			return c.Get(ctx, types.NamespacedName{Namespace: egressNS, Name: name}, p) == nil &&
				meta.IsStatusConditionTrue(p.Status.Conditions, gatev1.ConditionReady)
		})
	}
	// The ceiling leaves out github.com and port 8443 of beyond-ceiling's list, and says so.
	wait(t, "policy beyond-ceiling reports what lies outside its ceiling", func() bool {
		p := &gatev1.HarnessAgentPolicy{}
		if c.Get(ctx, types.NamespacedName{Namespace: egressNS, Name: "beyond-ceiling"}, p) != nil || p.Status.ObservedGeneration != p.Generation {
			return false
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, gatev1.ConditionEgressEnforced)
		return cond != nil && cond.Reason == gatev1.ReasonOutsideCeiling && strings.Contains(cond.Message, "github.com") && strings.Contains(cond.Message, "port 8443")
	})
	target, err := env.Kubectl(ctx, "", "-n", egressNS, "get", "pod", "target", "-o", "jsonpath={.status.podIP}")
	must(t, err)
	columns := []egressColumn{
		{"another pod", target + ":8080"},
		{"allowed /32, allowed port", "198.18.41.10:443"},
		{"allowed /32, other port", "198.18.41.10:8443"},
		{"denied /32 carved out of an allowed CIDR", "198.18.41.254:443"},
		{"allowed host by name (DNS pod)", "api.anthropic.com:443"},
		{"host not listed", "github.com:443"},
		{"address not listed", "198.18.40.30:443"},
		{"Kubernetes API Service", localenv.KubernetesService},
		{"cluster DNS Service", localenv.ClusterDNS + ":53"},
		{"port 53 of another pod", target + ":53"},
	}
	O, B := "open", "blocked"
	want := map[string][]string{
		"unselected": {O, O, O, O, O, O, O, O, O, O},
		"deny-all":   {B, B, B, B, B, B, B, B, B, B},
		"allow-list": {B, O, B, B, O, B, B, B, O, B},
		// github.com and 198.18.41.10:8443 are listed by the namespace policy, not by the ceiling.
		"beyond-ceiling": {B, O, B, B, O, B, B, B, O, B},
		// No namespace policy selects it: the baseline's NetworkPolicy is the ceiling itself.
		"cluster-only": {B, O, B, O, O, B, O, B, O, B},
	}
	rows := []string{"unselected", "deny-all", "allow-list", "beyond-ceiling", "cluster-only"}
	got := map[string][]string{}
	for _, pod := range rows {
		got[pod] = probeRow(ctx, t, env, pod, columns)
	}
	printTable(t, "egress on real packets (kube-router enforcing the rendered NetworkPolicies)", columns, rows, got)
	for _, pod := range rows {
		for i, col := range columns {
			if got[pod][i] != want[pod][i] {
				t.Errorf("egress table: pod %s (%s) to %s (%s): %s, want %s", pod, rowLabel(pod), col.name, col.addr, got[pod][i], want[pod][i])
			}
		}
	}

	// A second NetworkPolicy that reopens what the allow-list policy closes: the condition
	// says so, the packets agree, and removing it closes the hole again.
	const shadow = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: shadow, namespace: egress}
spec:
  podSelector: {matchLabels: {role: allow-list}}
  policyTypes: [Egress]
  egress:
  - to: [{ipBlock: {cidr: 198.18.40.30/32}}]
    ports: [{port: 443, protocol: TCP}]
`
	// A tenant NetworkPolicy that would open more than the ceiling is refused at apply; the
	// shadow below stays inside the ceiling (198.18.40.30/32 on 443), so it is admitted.
	const openAll = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: open-all, namespace: egress}
spec:
  podSelector: {matchLabels: {role: beyond-ceiling}}
  policyTypes: [Egress]
  egress:
  - to: [{ipBlock: {cidr: 0.0.0.0/0}}]
`
	if _, err := env.Kubectl(ctx, openAll, "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), "egress-ceiling") || !strings.Contains(err.Error(), "0.0.0.0/0") {
		t.Errorf("kubectl apply of a NetworkPolicy opening 0.0.0.0/0 under the ceiling: %v; want a refusal naming the ceiling and the CIDR", err)
	} else {
		t.Logf("refused at apply: %v", err)
	}
	_, err = env.Kubectl(ctx, shadow, "apply", "-f", "-")
	must(t, err)
	egressCondition := func() *metaCondition {
		p := &gatev1.HarnessAgentPolicy{}
		if c.Get(ctx, types.NamespacedName{Namespace: egressNS, Name: "allow-list"}, p) != nil {
			return nil
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, gatev1.ConditionEgressEnforced)
		if cond == nil {
			return nil
		}
		return &metaCondition{string(cond.Status), cond.Reason}
	}
	wait(t, "EgressEnforced=False ShadowedByPolicy", func() bool {
		cond := egressCondition()
		return cond != nil && cond.status == "False" && cond.reason == gatev1.ReasonShadowedByPolicy
	})
	unlisted := []egressColumn{{"address named by the shadowing policy", "198.18.40.30:443"}}
	waitProbe(ctx, t, env, "allow-list", unlisted, "open", "the shadowing NetworkPolicy reopens 198.18.40.30:443")
	_, err = env.Kubectl(ctx, "", "-n", egressNS, "delete", "networkpolicy", "shadow")
	must(t, err)
	wait(t, "EgressEnforced=True once the shadow is gone", func() bool {
		cond := egressCondition()
		return cond != nil && cond.status == "True"
	})
	waitProbe(ctx, t, env, "allow-list", unlisted, "blocked", "removing the shadowing NetworkPolicy closes 198.18.40.30:443 again")
}

type metaCondition struct{ status, reason string }

func rowLabel(pod string) string {
	switch pod {
	case "unselected":
		return "not selected by any policy"
	case "deny-all":
		return "deny-all policy"
	case "beyond-ceiling":
		return "policy listing more than its cluster ceiling"
	case "cluster-only":
		return "cluster policy only (its ceiling)"
	default:
		return "allow-list policy"
	}
}

func probeRow(ctx context.Context, t *testing.T, env *localenv.Env, pod string, columns []egressColumn) []string {
	t.Helper()
	addrs := make([]string, len(columns))
	for i, c := range columns {
		addrs[i] = c.addr
	}
	res, err := env.Probe(ctx, egressNS, pod, "probe", addrs...)
	must(t, err)
	row := make([]string, len(columns))
	for i, a := range addrs {
		row[i] = res[a]
	}
	return row
}

func waitProbe(ctx context.Context, t *testing.T, env *localenv.Env, pod string, columns []egressColumn, state, what string) {
	t.Helper()
	wait(t, what, func() bool { return probeRow(ctx, t, env, pod, columns)[0] == state })
	t.Logf("%s: %s", what, state)
}

func printTable(t *testing.T, title string, columns []egressColumn, rows []string, got map[string][]string) {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "pod")
	for _, c := range columns {
		fmt.Fprintf(w, "\t%s", c.name)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "")
	for _, c := range columns {
		fmt.Fprintf(w, "\t%s", c.addr)
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprint(w, rowLabel(r))
		for _, s := range got[r] {
			fmt.Fprintf(w, "\t%s", s)
		}
		fmt.Fprintln(w)
	}
	_ = w.Flush()
	t.Logf("%s:\n%s", title, b.String())
}

// testStartupWindow measures the ungoverned first moments of a new sandbox pod under the
// deny-all policy: without the egress-wait init container, the agent container's first probe
// of a denied destination may get through until the enforcer has programmed the pod; with it,
// the agent's first probe is blocked.
func testStartupWindow(ctx context.Context, t *testing.T, env *localenv.Env) {
	// egress-wait dials the canary Service by address, as the pod webhook writes it: a deny-all
	// pod cannot resolve its name.
	ip, err := env.Kubectl(ctx, "", "-n", localenv.OperatorNamespace, "get", "service", "gate-operator-egress-canary", "-o", "jsonpath={.spec.clusterIP}")
	must(t, err)
	ip = strings.TrimSpace(ip)
	canary := fmt.Sprintf("--control, '%s', --denied, '%s'", net.JoinHostPort(ip, "9444"), net.JoinHostPort(ip, "9445"))
	pods := `
apiVersion: v1
kind: Pod
metadata: {name: window-nowait, namespace: egress, labels: {role: deny-all}}
spec:
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 1000}
  containers:
  - {name: agent, image: ` + localenv.TestbedImage + `, imagePullPolicy: Never, args: [window]}
---
apiVersion: v1
kind: Pod
metadata: {name: window-wait, namespace: egress, labels: {role: deny-all}}
spec:
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 1000}
  initContainers:
  - {name: wait-for-egress-policy, image: ` + localenv.ConfirmerImage + `, command: [/egress-wait, ` + canary + `, --timeout, 60s]}
  containers:
  - {name: agent, image: ` + localenv.TestbedImage + `, imagePullPolicy: Never, args: [window]}
`
	_, err = env.Kubectl(ctx, pods, "apply", "-f", "-")
	must(t, err)
	result := map[string]string{}
	for _, pod := range []string{"window-nowait", "window-wait"} {
		wait(t, pod+" reports its window", func() bool {
			out, err := env.Kubectl(ctx, "", "-n", egressNS, "logs", pod, "-c", "agent")
			result[pod] = strings.TrimSpace(out)
			return err == nil && strings.HasPrefix(result[pod], "window:")
		})
		t.Logf("%s: %s", pod, result[pod])
	}
	waited, err := env.Kubectl(ctx, "", "-n", egressNS, "logs", "window-wait", "-c", "wait-for-egress-policy")
	must(t, err)
	t.Logf("window-wait's init container: %s", strings.TrimSpace(waited))
	if !strings.Contains(result["window-wait"], "first=blocked") {
		t.Errorf("with egress-wait, the agent's first probe of a denied destination got through: %s", result["window-wait"])
	}
}

// testAdmission: on the node, with the chart's webhooks (self-managed certificates), a policy
// whose rule does not compile is refused at apply with its field path, and a pod that carries
// only the policy's label runs governed: the injected hook blocks a call inside it.
func testAdmission(ctx context.Context, t *testing.T, env *localenv.Env) {
	const broken = `
apiVersion: gate.intutic.io/v1alpha1
kind: HarnessAgentPolicy
metadata: {name: broken, namespace: agents}
spec:
  podSelector: {matchLabels: {app: none}}
  rules:
  - {name: typo, tools: [bash], when: 'inptu.command == "x"', action: Block, reason: typo}
`
	_, err := env.Kubectl(ctx, broken, "apply", "-f", "-")
	if err == nil || !strings.Contains(err.Error(), "spec.rules[0].when") {
		t.Errorf("kubectl apply of a policy with a broken when: %v; want a refusal naming spec.rules[0].when", err)
	} else {
		t.Logf("refused at apply: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(env.Root, "docs", "examples", "sandbox-pod-labelled.yaml"))
	must(t, err)
	manifest := strings.Replace(string(b), "registry.example/coding-agent:1.0", localenv.TestbedImage, 1)
	manifest = strings.Replace(manifest, "name: coding-agent-0", "name: coding-agent-labelled", 1)
	pod, err := env.ApplyPod(ctx, ns, manifest)
	must(t, err)
	inits, err := env.Kubectl(ctx, "", "-n", ns, "get", "pod", pod, "-o", "jsonpath={.spec.initContainers[*].name}")
	must(t, err)
	t.Logf("injected init containers of %s: %s", pod, inits)
	out, code, err := env.Hook(ctx, ns, pod, "agent", "Bash", `{"command":"rm -rf /"}`)
	must(t, err)
	if code != 2 || !strings.Contains(out, `"permissionDecision":"deny"`) {
		t.Errorf("a blocked Bash in the labelled pod: exit %d, %s", code, out)
	}
	t.Run("governed pods", func(t *testing.T) { testGovernedPods(ctx, t, env, pod) })
}
