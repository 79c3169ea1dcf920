package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
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
