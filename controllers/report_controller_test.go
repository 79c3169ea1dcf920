package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/testutil"
)

// testRenderDigest is the render digest the suite's ReportReconciler takes for current.
const testRenderDigest = "sha256:current"

// testClock is the suite's ReportReconciler's clock: the real time, which a test may not move
// (the exception's expiry is read against it).
var testClock = clocktesting.NewFakePassiveClock(time.Now())

// findings are a Report's results other than passes, as "result rule subject".
func findings(r *reportsv1alpha1.Report) []string {
	var out []string
	for _, res := range r.Results {
		if res.Result == "pass" {
			continue
		}
		subject := ""
		if len(res.Subjects) > 0 {
			subject = res.Subjects[0].Kind + "/" + res.Subjects[0].Name
		}
		out = append(out, fmt.Sprintf("%s %s %s", res.Result, res.Rule, subject))
	}
	return out
}

// waitReport waits for the namespace's Report to have these findings (in the Report's order).
func waitReport(t *testing.T, ns string, want ...string) *reportsv1alpha1.Report {
	t.Helper()
	report := &reportsv1alpha1.Report{}
	testutil.Eventually(t, 30*time.Second, func() error {
		if err := k8sClient.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: ReportName}, report); err != nil {
			return err
		}
		if got := findings(report); strings.Join(got, "; ") != strings.Join(want, "; ") {
			return fmt.Errorf("findings %q, want %q", got, want)
		}
		return nil
	})
	return report
}

func sandboxPod(ns, name, policy string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{gatev1.LabelPolicy: policy}, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}},
	}
}

// TestPostureReport: a namespace with a policy gets one Report: a pod the policy selects that
// was never injected (the suite runs no webhook, as a cluster with the webhooks off) fails, and
// clears when it is replaced by one injected now; one injected by another rendering warns; a
// policy that is not Ready fails; an exception about to expire warns. The summary counts them
// all. Without policies the namespace has no Report.
func TestPostureReport(t *testing.T) {
	ctx := testutil.Context(t, 90*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "report-")
	p := newPolicy(ns, "coding-agents")
	p.Spec.Exceptions = &gatev1.NamespaceExceptionPolicy{MaxDuration: metav1.Duration{Duration: 24 * time.Hour}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(k8sClient.Create(ctx, p))
	waitCondition(t, p, gatev1.ConditionReady, metav1.ConditionTrue, "")
	report := waitReport(t, ns)
	if report.Source != "gate-operator" || report.Summary.Pass != 1 || report.Labels[gatev1.LabelManagedBy] != gatev1.ManagedByValue {
		t.Fatalf("report %+v", report)
	}

	ungoverned := sandboxPod(ns, "created-before", p.Name, nil)
	must(k8sClient.Create(ctx, ungoverned))
	stale := sandboxPod(ns, "injected-before", p.Name, map[string]string{gatev1.AnnotationInjection: "sha256:older"})
	must(k8sClient.Create(ctx, stale))
	report = waitReport(t, ns, "fail pod-governed Pod/created-before", "warn pod-injection-current Pod/injected-before")
	if msg := report.Results[0].Description; !strings.Contains(msg, "does not run its hook") || report.Results[0].Policy != "HarnessAgentPolicy/coding-agents" {
		t.Errorf("the ungoverned pod's result: %+v", report.Results[0])
	}

	// Replaced by a pod the injection governs now, it clears.
	must(k8sClient.Delete(ctx, ungoverned))
	must(k8sClient.Create(ctx, sandboxPod(ns, "created-again", p.Name, map[string]string{gatev1.AnnotationInjection: testRenderDigest})))
	testutil.Eventually(t, 30*time.Second, func() error {
		report = waitReport(t, ns, "warn pod-injection-current Pod/injected-before")
		if want := (reportsv1alpha1.ReportSummary{Pass: 2, Warn: 1}); report.Summary != want {
			return fmt.Errorf("summary %+v, want %+v (passes: the policy, the pods)", report.Summary, want)
		}
		return nil
	})

	// An exception about to expire warns.
	e := &gatev1.GateException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tmp-rm"}, Spec: gatev1.GateExceptionSpec{
		PolicyRef: gatev1.ExceptionPolicyRef{Kind: gatev1.ExceptionOfNamespacePolicy, Name: p.Name}, Rules: []gatev1.RuleName{"no-root-rm"},
		ExpiresAt: metav1.NewTime(testClock.Now().Add(2 * time.Hour).Truncate(time.Second)), Reason: "migration"}}
	must(k8sClient.Create(ctx, e))
	waitReport(t, ns, "warn exception-expiring GateException/tmp-rm", "warn pod-injection-current Pod/injected-before")

	// A policy that stops compiling is not Ready.
	updatePolicy(t, p, func(p *gatev1.HarnessAgentPolicy) { p.Spec.Rules[0].When = "inptu.command" })
	waitReport(t, ns, "fail policy-ready HarnessAgentPolicy/coding-agents", "warn exception-expiring GateException/tmp-rm", "warn pod-injection-current Pod/injected-before")

	// No policy, no Report.
	must(k8sClient.Delete(ctx, p))
	testutil.Eventually(t, 30*time.Second, func() error {
		err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: ReportName}, &reportsv1alpha1.Report{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Report is still there: %v", err)
		}
		return nil
	})
}

// loopbackOnly is the suite's HTTP client for the Reports' agent lookups: the tests' fakes
// listen on loopback, and the agents of other tests' SessionConfirmers (whose base URL is the
// real API's) are refused here instead of being sent out.
func loopbackOnly() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("the test suite dials only loopback, not %s", addr)
		}
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{Transport: tr}
}

// TestPostureReportAgentTools: each agent of a SessionConfirmer that runs tools under
// always_allow is a warning naming them (high for bash, write, edit and web_fetch), whether
// by its toolset's default or by a tool's own config; a SessionConfirmer whose agents run
// none gets a pass; an agent that cannot be read (unknown to the API, or its key Secret
// missing) is an error naming it, beside the other results; a SessionConfirmer without
// agentIDs gets none. The key appears nowhere in the Report. A change of a SessionConfirmer's
// agents, or its deletion, updates the Report.
func TestPostureReportAgentTools(t *testing.T) {
	ctx := testutil.Context(t, 90*time.Second)
	const key = "sk-ant-report-key-never-shown"
	fake := anthropictest.New(key)
	t.Cleanup(fake.Close)
	fake.AddAgent(anthropictest.Agent{ID: "agent_defaults", Name: "defaults", Tools: []anthropictest.Toolset{{}}})
	fake.AddAgent(anthropictest.Agent{ID: "agent_fetch", Name: "fetcher", Tools: []anthropictest.Toolset{
		{Default: anthropic.PolicyAlwaysAsk, Configs: []anthropictest.ToolConfig{{Name: "web_fetch", Policy: anthropic.PolicyAlwaysAllow}}}}})
	fake.AddAgent(anthropictest.Agent{ID: "agent_governed", Name: "governed", Tools: []anthropictest.Toolset{
		{Default: anthropic.PolicyAuto, Configs: []anthropictest.ToolConfig{{Name: "bash", Policy: anthropic.PolicyAlwaysAsk}}},
		{MCPServer: "deploy", Default: anthropic.PolicyAlwaysAsk}}, CustomTools: []string{"lookup"}})

	ns := testutil.CreateNamespace(ctx, t, k8sClient, "report-agents-")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := newPolicy(ns, "coding-agents")
	must(k8sClient.Create(ctx, p))
	must(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "anthropic"}, Data: map[string][]byte{"api-key": []byte(key)}}))
	confirmer := func(name, secret string, agents ...string) *gatev1.SessionConfirmer {
		sc := &gatev1.SessionConfirmer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gatev1.SessionConfirmerSpec{
			PolicyRef: gatev1.PolicyReference{Name: p.Name},
			Anthropic: gatev1.AnthropicSpec{BaseURL: fake.URL, APIKeySecretRef: gatev1.SecretKeyReference{Name: secret, Key: "api-key"}},
			Sessions:  gatev1.SessionsSpec{AgentIDs: agents},
		}}
		must(k8sClient.Create(ctx, sc))
		return sc
	}
	allows := confirmer("allows", "anthropic", "agent_defaults", "agent_fetch")
	governed := confirmer("governed", "anthropic", "agent_governed")
	confirmer("broken", "anthropic", "agent_governed", "agent_missing")
	confirmer("keyless", "no-such-secret", "agent_governed")
	confirmer("webhook-only", "anthropic")

	report := waitReport(t, ns, "error agent-tools-confirmed SessionConfirmer/broken", "error agent-tools-confirmed SessionConfirmer/keyless",
		"warn agent-tools-confirmed SessionConfirmer/allows", "warn agent-tools-confirmed SessionConfirmer/allows")
	// find is the result of the rule about subject whose message names what.
	find := func(result reportsv1alpha1.Result, rule, subject, what string) *reportsv1alpha1.ReportResult {
		for i, res := range report.Results {
			if res.Result == result && res.Rule == rule && subjectName(res) == subject && strings.Contains(res.Description, what) {
				return &report.Results[i]
			}
		}
		return nil
	}
	for _, c := range []struct {
		result          reportsv1alpha1.Result
		confirmer, what string
		severity        reportsv1alpha1.ResultSeverity
		has, hasNot     []string
	}{
		{"warn", "allows", "agent_defaults", "high", []string{"runs bash, edit, read, write, glob, grep, web_fetch, web_search under always_allow", "never sees them"}, nil},
		{"warn", "allows", "agent_fetch", "high", []string{"runs web_fetch under always_allow"}, []string{"bash"}},
		{"error", "broken", "agent_missing", "", []string{"404 not_found_error"}, nil},
		{"error", "keyless", "agent_governed", "", []string{"Secret no-such-secret does not exist"}, nil},
		{"pass", "governed", "agent_governed", "", []string{"no agent of SessionConfirmer governed"}, nil},
	} {
		res := find(c.result, checkAgentTools, "SessionConfirmer/"+c.confirmer, c.what)
		if res == nil {
			t.Errorf("no %s for SessionConfirmer %s naming %s in %+v", c.result, c.confirmer, c.what, report.Results)
			continue
		}
		if res.Severity != c.severity {
			t.Errorf("%s %s %s: severity %q, want %q", c.result, c.confirmer, c.what, res.Severity, c.severity)
		}
		for _, s := range c.has {
			if !strings.Contains(res.Description, s) {
				t.Errorf("%q does not say %q", res.Description, s)
			}
		}
		for _, s := range c.hasNot {
			if strings.Contains(res.Description, s) {
				t.Errorf("%q names %q", res.Description, s)
			}
		}
	}
	if find("pass", checkAgentTools, "SessionConfirmer/broken", "") != nil || find("pass", checkAgentTools, "SessionConfirmer/webhook-only", "") != nil {
		t.Error("a SessionConfirmer with an agent that could not be read, or with no agents, passes")
	}
	if find("pass", checkPolicyReady, "HarnessAgentPolicy/coding-agents", "") == nil {
		t.Error("the policy's result is not there beside the agents'")
	}
	if report.Summary.Error != 2 || report.Summary.Warn != 2 {
		t.Errorf("summary %+v, want 2 errors and 2 warnings", report.Summary)
	}
	if b, _ := json.Marshal(report); strings.Contains(string(b), key) {
		t.Error("the Report carries the API key")
	}

	// The governed SessionConfirmer takes on an agent that allows web_fetch; the one that
	// allows everything goes.
	testutil.Eventually(t, 10*time.Second, func() error {
		sc := &gatev1.SessionConfirmer{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(governed), sc); err != nil {
			return err
		}
		sc.Spec.Sessions.AgentIDs = append(sc.Spec.Sessions.AgentIDs, "agent_fetch")
		return k8sClient.Update(ctx, sc)
	})
	must(k8sClient.Delete(ctx, allows))
	waitReport(t, ns, "error agent-tools-confirmed SessionConfirmer/broken", "error agent-tools-confirmed SessionConfirmer/keyless",
		"warn agent-tools-confirmed SessionConfirmer/governed")
}
