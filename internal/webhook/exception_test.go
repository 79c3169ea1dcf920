package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/testutil"
)

// exceptionFixture is a cluster policy that allows exceptions for an hour in namespaces
// labelled with its own value, one such namespace, and users there: alice may write
// exceptions and exempt the policy, mallory may only write exceptions.
type exceptionFixture struct {
	ns, other string
	policy    *gatev1.ClusterHarnessAgentPolicy
}

func newExceptionFixture(ctx context.Context, t *testing.T) exceptionFixture {
	t.Helper()
	sel := "exc-" + rand.String(5)
	mk := func(labels map[string]string) string {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "exceptions-", Labels: labels}}
		must(t, k8sClient.Create(ctx, ns))
		return ns.Name
	}
	f := exceptionFixture{ns: mk(map[string]string{"exceptions-test": sel}), other: mk(nil)}
	f.policy = &gatev1.ClusterHarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: sel},
		Spec: gatev1.ClusterHarnessAgentPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"exceptions-test": "none"}},
			Rules: []gatev1.Rule{
				{Name: "no-curl", Tools: []string{"bash"}, When: `input.command.startsWith("curl")`, Action: gatev1.ActionBlock, Reason: "curl"},
				{Name: "no-wget", Tools: []string{"bash"}, When: `input.command.startsWith("wget")`, Action: gatev1.ActionBlock, Reason: "wget"},
			},
			Exceptions: &gatev1.ClusterExceptionPolicy{
				NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"exceptions-test": sel}},
				MaxDuration:       metav1.Duration{Duration: time.Hour},
			},
		},
	}
	must(t, k8sClient.Create(ctx, f.policy))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), f.policy) })
	for _, ns := range []string{f.ns, f.other} {
		must(t, k8sClient.Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exception-writer"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{gatev1.GroupVersion.Group}, Resources: []string{"gateexceptions"}, Verbs: []string{"get", "create", "update"}}},
		}))
	}
	return f
}

// TestExceptionAdmission: only a user with exempt on the policy may write an exception of it,
// only where and for as long as the policy allows, naming rules it has; the requester is
// recorded from the request.
func TestExceptionAdmission(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	f := newExceptionFixture(ctx, t)
	alice, mallory := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: approver}, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: writer}
	for _, ns := range []string{f.ns, f.other} {
		must(t, k8sClient.Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exempter"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{gatev1.GroupVersion.Group}, Resources: []string{"clusterharnessagentpolicies"},
				ResourceNames: []string{f.policy.Name}, Verbs: []string{gatev1.ExemptVerb}}},
		}))
		bind(ctx, t, ns, "Role", "exception-writer", alice, mallory)
		bind(ctx, t, ns, "Role", "exempter", alice)
		waitAllowed(ctx, t, approver, ns, gatev1.ExemptVerb, "clusterharnessagentpolicies", f.policy.Name)
		waitAllowed(ctx, t, writer, ns, "create", "gateexceptions", "")
	}
	exception := func(ns string, expires time.Duration, rules ...gatev1.RuleName) *gatev1.GateException {
		return &gatev1.GateException{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "lift-"},
			Spec: gatev1.GateExceptionSpec{
				PolicyRef: gatev1.ExceptionPolicyRef{Kind: gatev1.ExceptionOfClusterPolicy, Name: f.policy.Name},
				Rules:     rules, ExpiresAt: metav1.NewTime(time.Now().Add(expires)), Reason: "incident 42", Ticket: "INC-42",
				// A client's own record of who asked is replaced by the request's.
			},
		}
	}
	refused := func(what string, err error, want string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: admitted", what)
		} else if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: refused with %v, want it to say %q", what, err, want)
		}
	}

	err := as(t, writer, "").Create(ctx, exception(f.ns, 30*time.Minute, "no-curl"))
	refused("mallory, without exempt", err, "may not exempt")
	if err != nil && !apierrors.IsForbidden(err) {
		t.Errorf("refused as %v, want Forbidden", apierrors.ReasonForError(err))
	}
	refused("longer than maxDuration", as(t, approver, "").Create(ctx, exception(f.ns, 2*time.Hour, "no-curl")), "spec.exceptions.maxDuration")
	refused("in a namespace the policy does not allow", as(t, approver, "").Create(ctx, exception(f.other, 30*time.Minute, "no-curl")), "does not allow exceptions in namespace")
	refused("a rule the policy does not have", as(t, approver, "").Create(ctx, exception(f.ns, 30*time.Minute, "no-such-rule")), "has no rule no-such-rule")
	refused("already expired", as(t, approver, "").Create(ctx, exception(f.ns, -time.Minute, "no-curl")), "not in the future")

	gex := exception(f.ns, 30*time.Minute, "no-curl")
	gex.Annotations = map[string]string{gatev1.AnnotationRequestedBy: "someone-else"}
	if err := as(t, approver, "").Create(ctx, gex); err != nil {
		t.Fatalf("alice's exception was refused: %v", err)
	}
	if got := gex.Annotations[gatev1.AnnotationRequestedBy]; got != approver {
		t.Errorf("requested-by %q, want %s from the request", got, approver)
	}
	if _, err := time.Parse(time.RFC3339, gex.Annotations[gatev1.AnnotationRequestedAt]); err != nil {
		t.Errorf("requested-at: %v", err)
	}
	// mallory may not change it either, but may touch its labels.
	changed := gex.DeepCopy()
	changed.Spec.Rules = append(changed.Spec.Rules, "no-wget")
	refused("mallory widening alice's exception", as(t, writer, "").Update(ctx, changed), "may not exempt")
	labelled := gex.DeepCopy()
	labelled.Labels = map[string]string{"team": "a"}
	if err := as(t, writer, "").Update(ctx, labelled); err != nil {
		t.Errorf("a label change needs no exempt: %v", err)
	} else if labelled.Annotations[gatev1.AnnotationRequestedBy] != approver {
		t.Errorf("a label change rewrote requested-by to %q", labelled.Annotations[gatev1.AnnotationRequestedBy])
	}
}

// TestNamespacePolicyExceptions: a namespace policy without spec.exceptions allows none.
func TestNamespacePolicyExceptions(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "nsexceptions-")
	p := policyWith(ns, "agents", gatev1.Rule{Name: "no-curl", Tools: []string{"bash"}, When: `input.command.startsWith("curl")`, Action: gatev1.ActionBlock, Reason: "curl"})
	must(t, k8sClient.Create(ctx, p))
	gex := &gatev1.GateException{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lift"},
		Spec: gatev1.GateExceptionSpec{PolicyRef: gatev1.ExceptionPolicyRef{Kind: gatev1.ExceptionOfNamespacePolicy, Name: "agents"},
			Rules: []gatev1.RuleName{"no-curl"}, ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour)), Reason: "x"},
	}
	if err := k8sClient.Create(ctx, gex.DeepCopy()); err == nil || !strings.Contains(err.Error(), "allows no exceptions") {
		t.Fatalf("an exception of a policy that allows none: %v", err)
	}
	p.Spec.Exceptions = &gatev1.NamespaceExceptionPolicy{MaxDuration: metav1.Duration{Duration: 2 * time.Hour}}
	must(t, k8sClient.Update(ctx, p))
	if err := k8sClient.Create(ctx, gex.DeepCopy()); err != nil {
		t.Fatalf("the admin (who may exempt anything) was refused: %v", err)
	}
}
