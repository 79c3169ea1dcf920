package webhook

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/testutil"
)

// The users of these tests, impersonated: the API server authorizes them with RBAC (envtest runs
// it with --authorization-mode=RBAC) and passes their identity to the webhooks.
const (
	approver  = "alice"   // bound to the real gate-operator-approver ClusterRole of config/rbac
	writer    = "mallory" // may update toolapprovals/status, but has no verb approve
	confirmer = "agents"  // the SessionConfirmer owning the approvals; its SA is agents-confirmer
)

// approvalNamespace makes a namespace where alice is bound to config/rbac's approver
// ClusterRole, mallory may write ToolApproval status (only), and the SessionConfirmer agents'
// ServiceAccount may write it as the confirmer's Role lets it.
func approvalNamespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "approvals-")
	ensureApproverRole(ctx, t)
	statusWriter := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "status-writer"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{gatev1.GroupVersion.Group}, Resources: []string{"toolapprovals"}, Verbs: []string{"get"}},
			{APIGroups: []string{gatev1.GroupVersion.Group}, Resources: []string{"toolapprovals/status"}, Verbs: []string{"get", "update", "patch"}},
		},
	}
	must(t, k8sClient.Create(ctx, statusWriter))
	bind(ctx, t, ns, "ClusterRole", ApproverClusterRole, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: approver})
	bind(ctx, t, ns, "Role", "status-writer",
		rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: writer},
		rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: confirmer + "-confirmer", Namespace: ns})
	waitAllowed(ctx, t, approver, ns, gatev1.ApproveVerb, "harnessagentpolicies", "default")
	waitAllowed(ctx, t, writer, ns, "update", "toolapprovals/status", "")
	waitAllowed(ctx, t, "system:serviceaccount:"+ns+":"+confirmer+"-confirmer", ns, "update", "toolapprovals/status", "")
	return ns
}

// waitAllowed waits until RBAC, which reads bindings through an informer, lets user do verb.
func waitAllowed(ctx context.Context, t *testing.T, user, ns, verb, resource, name string) {
	t.Helper()
	res, sub, _ := strings.Cut(resource, "/")
	testutil.Eventually(t, 10*time.Second, func() error {
		r := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: gatev1.GroupVersion.Group, Resource: res, Subresource: sub, Name: name,
		}}}
		if err := k8sClient.Create(ctx, r); err != nil {
			return err
		}
		if !r.Status.Allowed {
			return fmt.Errorf("%s may not %s %s in %s yet", user, verb, resource, ns)
		}
		return nil
	})
}

// ensureApproverRole creates the ClusterRole of config/rbac/approver_role.yaml once.
func ensureApproverRole(ctx context.Context, t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", "approver_role.yaml"))
	must(t, err)
	role := &rbacv1.ClusterRole{}
	must(t, yaml.UnmarshalStrict(data, role))
	if role.Name != ApproverClusterRole {
		t.Fatalf("config/rbac/approver_role.yaml names %q, the webhook's refusals name %q", role.Name, ApproverClusterRole)
	}
	if err := k8sClient.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func bind(ctx context.Context, t *testing.T, ns, kind, name string, subjects ...rbacv1.Subject) {
	t.Helper()
	must(t, k8sClient.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: name + "-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name},
		Subjects:   subjects,
	}))
}

// as is a client acting as user, in groups.
func as(t *testing.T, user, uid string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(testConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, UID: uid, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	must(t, err)
	return c
}

func asConfirmer(t *testing.T, ns string) client.Client {
	t.Helper()
	return as(t, "system:serviceaccount:"+ns+":"+confirmer+"-confirmer", "", "system:serviceaccounts", "system:serviceaccounts:"+ns)
}

// newApproval creates a Pending ToolApproval of policy default, owned by the SessionConfirmer
// agents, that expires at expires.
func newApproval(ctx context.Context, t *testing.T, ns, name string, expires time.Time) *gatev1.ToolApproval {
	t.Helper()
	ta := &gatev1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: gatev1.GroupVersion.String(), Kind: "SessionConfirmer", Name: confirmer, UID: types.UID("0b7e4a5c-confirmer"), Controller: new(true),
		}}},
		Spec: gatev1.ToolApprovalSpec{
			Surface: gatev1.SurfaceManagedAgents, Policy: "default", SessionID: "sesn_01", ToolUseID: "toolu_" + name, Tool: "web_fetch",
			Rule: "ask-fetch", Reason: "fetching a URL needs a human",
			Input:     gatev1.ToolApprovalInput{Size: 2, SHA256: strings.Repeat("ab", 32)},
			ExpiresAt: metav1.NewTime(expires),
		},
	}
	must(t, k8sClient.Create(ctx, ta))
	ta.Status.State = gatev1.ApprovalPending
	must(t, asConfirmer(t, ns).Status().Update(ctx, ta))
	return ta
}

// setDecision sets the state and its condition True, with message.
func setDecision(ta *gatev1.ToolApproval, state gatev1.ToolApprovalState, message string) {
	ta.Status.State = state
	meta.SetStatusCondition(&ta.Status.Conditions, metav1.Condition{Type: state.ConditionType(), Status: metav1.ConditionTrue, Reason: "Test", Message: message})
	if ta.Status.Decision == nil {
		ta.Status.Decision = &gatev1.ToolApprovalDecision{}
	}
	ta.Status.Decision.Message = message
}

// decide sets the decision (setDecision) and writes the status as c.
func decide(ctx context.Context, c client.Client, ta *gatev1.ToolApproval, state gatev1.ToolApprovalState, message string) error {
	setDecision(ta, state, message)
	return c.Status().Update(ctx, ta)
}

// refusedWith checks err is an admission refusal of the decision webhook that says want.
func refusedWith(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want refused with %q", want)
	}
	if !strings.Contains(err.Error(), `admission webhook "toolapprovals.gate.intutic.io" denied the request: `) || !strings.Contains(err.Error(), want) {
		t.Fatalf("refused with %q; want the decision webhook's refusal saying %q", err, want)
	}
}

func get(ctx context.Context, t *testing.T, ta *gatev1.ToolApproval) *gatev1.ToolApproval {
	t.Helper()
	out := &gatev1.ToolApproval{}
	must(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(ta), out))
	return out
}

// TestApproveAndDenyRecordTheRequester: a user bound to config/rbac's approver ClusterRole
// approves one call and denies another; each decision records that user, uid and groups from
// the request and the server's time, whatever the client wrote as the decider, and keeps the
// message. After that nothing about the decision changes, for anyone, the API server's
// system:masters included.
func TestApproveAndDenyRecordTheRequester(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := approvalNamespace(ctx, t)
	alice := as(t, approver, "alice-uid", "team-a")
	wantGroups := []string{"team-a", "system:authenticated"}

	for _, tc := range []struct {
		state gatev1.ToolApprovalState
		msg   string
	}{{gatev1.ApprovalApproved, "fine, it is our docs site"}, {gatev1.ApprovalDenied, "not that host"}} {
		t.Run(string(tc.state), func(t *testing.T) {
			ta := newApproval(ctx, t, ns, strings.ToLower(string(tc.state)), time.Now().Add(time.Hour))
			// The client claims to be someone else, long ago.
			ta.Status.Decision = &gatev1.ToolApprovalDecision{User: "mallory", UID: "forged", Groups: []string{"system:masters"}, Time: &metav1.Time{Time: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)}}
			before := time.Now().Add(-time.Second)
			if err := decide(ctx, alice, ta, tc.state, tc.msg); err != nil {
				t.Fatalf("alice, bound to %s, may not decide: %v", ApproverClusterRole, err)
			}
			got := get(ctx, t, ta)
			d := got.Status.Decision
			if got.Status.State != tc.state || d == nil || d.User != approver || d.UID != "alice-uid" || !slices.Equal(d.Groups, wantGroups) || d.Message != tc.msg {
				t.Fatalf("stored decision %+v in state %s; want %s by alice (alice-uid, %v) saying %q", d, got.Status.State, tc.state, wantGroups, tc.msg)
			}
			if d.Time == nil {
				t.Fatal("no decision time")
			}
			if decided := d.Time.Time; decided.Before(before) || decided.After(time.Now().Add(time.Second)) {
				t.Errorf("decision time %v is not the server's now", decided)
			}

			// No change after a decision: not the other answer, not the message, not by anyone.
			other := gatev1.ApprovalDenied
			if tc.state == gatev1.ApprovalDenied {
				other = gatev1.ApprovalApproved
			}
			again := got.DeepCopy()
			again.Status.Conditions = nil
			refusedWith(t, decide(ctx, alice, again, other, "changed my mind"), "is already "+string(tc.state)+" by alice: no change after a decision")
			edited := got.DeepCopy()
			edited.Status.Decision.Message = "edited"
			refusedWith(t, k8sClient.Status().Update(ctx, edited), "no change after a decision")
			back := got.DeepCopy()
			back.Status = gatev1.ToolApprovalStatus{State: gatev1.ApprovalPending}
			refusedWith(t, k8sClient.Status().Update(ctx, back), "no change after a decision")
			if now := get(ctx, t, ta); now.Status.State != tc.state || now.Status.Decision.Message != tc.msg {
				t.Errorf("the decision changed: %+v", now.Status)
			}
		})
	}
}

// TestDecisionRefusedWithoutTheVerb: a user who may write ToolApproval status but lacks the verb
// approve on the approval's policy is refused, approving or denying, with what to bind; so is a
// user who has the verb only for another policy, or only in another namespace. The approval
// stays Pending.
func TestDecisionRefusedWithoutTheVerb(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := approvalNamespace(ctx, t)
	other := approvalNamespace(ctx, t)
	ta := newApproval(ctx, t, ns, "held", time.Now().Add(time.Hour))

	want := "user mallory may not approve calls of policy " + ns + "/default: needs the verb approve on harnessagentpolicies/default in namespace " + ns + " (bind the ClusterRole gate-operator-approver)"
	refusedWith(t, decide(ctx, as(t, writer, ""), ta.DeepCopy(), gatev1.ApprovalApproved, ""), want)
	refusedWith(t, decide(ctx, as(t, writer, ""), ta.DeepCopy(), gatev1.ApprovalDenied, ""), "user mallory may not deny calls of policy "+ns+"/default")

	// carol may approve policy "other" here, and everything in the other namespace.
	must(t, k8sClient.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "approve-other"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{gatev1.GroupVersion.Group}, Resources: []string{"harnessagentpolicies"}, ResourceNames: []string{"other"}, Verbs: []string{gatev1.ApproveVerb}}},
	}))
	carol := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}
	bind(ctx, t, ns, "Role", "approve-other", carol)
	bind(ctx, t, ns, "Role", "status-writer", carol)
	bind(ctx, t, other, "ClusterRole", ApproverClusterRole, carol)
	waitAllowed(ctx, t, "carol", ns, gatev1.ApproveVerb, "harnessagentpolicies", "other")
	waitAllowed(ctx, t, "carol", ns, "update", "toolapprovals/status", "")
	waitAllowed(ctx, t, "carol", other, gatev1.ApproveVerb, "harnessagentpolicies", "default")
	refusedWith(t, decide(ctx, as(t, "carol", ""), ta.DeepCopy(), gatev1.ApprovalApproved, ""), "user carol may not approve calls of policy "+ns+"/default")

	if got := get(ctx, t, ta); got.Status.State != gatev1.ApprovalPending || got.Status.Decision != nil {
		t.Errorf("a refused decision changed the approval: %+v", got.Status)
	}
	// The approver role, bound here, is what it takes.
	if err := decide(ctx, as(t, approver, ""), ta, gatev1.ApprovalApproved, ""); err != nil {
		t.Fatal(err)
	}
}

// TestDeadline: an answer that arrives at or after spec.expiresAt is refused, even from an
// approver; Expired is refused before spec.expiresAt, and after it is accepted from the owning
// SessionConfirmer's ServiceAccount alone, recorded as its decision.
func TestDeadline(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := approvalNamespace(ctx, t)
	alice := as(t, approver, "")
	past := time.Now().Add(-time.Minute).Truncate(time.Second)

	late := newApproval(ctx, t, ns, "late", past)
	refusedWith(t, decide(ctx, alice, late.DeepCopy(), gatev1.ApprovalApproved, ""),
		"the decision arrived after the deadline: ToolApproval "+ns+"/late expired at "+past.UTC().Format(time.RFC3339))
	refusedWith(t, decide(ctx, alice, late.DeepCopy(), gatev1.ApprovalDenied, ""), "arrived after the deadline")

	early := newApproval(ctx, t, ns, "early", time.Now().Add(time.Hour))
	refusedWith(t, decide(ctx, asConfirmer(t, ns), early.DeepCopy(), gatev1.ApprovalExpired, ""), "does not expire before")

	// Past the deadline only the confirmer that holds the call may say Expired.
	refusedWith(t, decide(ctx, alice, late.DeepCopy(), gatev1.ApprovalExpired, ""),
		"status.state Expired is written only by SessionConfirmer agents (as system:serviceaccount:"+ns+":agents-confirmer), not by alice")
	bind(ctx, t, ns, "Role", "status-writer", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "other-confirmer", Namespace: ns})
	waitAllowed(ctx, t, "system:serviceaccount:"+ns+":other-confirmer", ns, "update", "toolapprovals/status", "")
	refusedWith(t, decide(ctx, as(t, "system:serviceaccount:"+ns+":other-confirmer", ""), late.DeepCopy(), gatev1.ApprovalExpired, ""), "written only by SessionConfirmer agents")
	if err := decide(ctx, asConfirmer(t, ns), late, gatev1.ApprovalExpired, "no human approved this call within 15m"); err != nil {
		t.Fatalf("the owning confirmer may not expire its call: %v", err)
	}
	if d := get(ctx, t, late).Status.Decision; d == nil || d.User != "system:serviceaccount:"+ns+":agents-confirmer" {
		t.Errorf("Expired recorded as %+v", d)
	}
	// AnsweredInRuntime is the confirmer's too, at any time.
	refusedWith(t, decide(ctx, alice, early.DeepCopy(), gatev1.ApprovalAnsweredInRuntime, ""), "written only by SessionConfirmer agents")
	if err := decide(ctx, asConfirmer(t, ns), early, gatev1.ApprovalAnsweredInRuntime, ""); err != nil {
		t.Fatalf("the owning confirmer may not record a runtime answer: %v", err)
	}
}

// TestStateAndConditionsAgree: a final state without its condition True, a final condition True
// beside another state, and a decider written while Pending are refused, each at its field; and
// no approval is created already decided.
func TestStateAndConditionsAgree(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := approvalNamespace(ctx, t)
	ta := newApproval(ctx, t, ns, "shape", time.Now().Add(time.Hour))

	noCondition := ta.DeepCopy()
	noCondition.Status.State = gatev1.ApprovalApproved
	refusedWith(t, k8sClient.Status().Update(ctx, noCondition), "status.state Approved needs the condition Approved with status True")

	wrongCondition := ta.DeepCopy()
	setDecision(wrongCondition, gatev1.ApprovalDenied, "")
	wrongCondition.Status.State = gatev1.ApprovalApproved
	meta.SetStatusCondition(&wrongCondition.Status.Conditions, metav1.Condition{Type: gatev1.ConditionApproved, Status: metav1.ConditionTrue, Reason: "Test"})
	err := k8sClient.Status().Update(ctx, wrongCondition)
	refusedWith(t, err, "status.conditions: Denied is True but status.state is Approved")
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil || status.Status().Details.Causes[0].Field != "status.conditions" {
		t.Errorf("the refusal does not name the field: %v", err)
	}

	pendingButTrue := ta.DeepCopy()
	meta.SetStatusCondition(&pendingButTrue.Status.Conditions, metav1.Condition{Type: gatev1.ConditionExpired, Status: metav1.ConditionTrue, Reason: "Test"})
	refusedWith(t, k8sClient.Status().Update(ctx, pendingButTrue), "Expired is True but status.state is Pending")

	claimed := ta.DeepCopy()
	claimed.Status.Decision = &gatev1.ToolApprovalDecision{User: "alice"}
	refusedWith(t, k8sClient.Status().Update(ctx, claimed), "leave them empty while the state is Pending")

	// Nor can an approval be created decided: the API server drops status on create, and the
	// schema's default makes it Pending.
	born := &gatev1.ToolApproval{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "born-approved"}, Spec: ta.Spec}
	setDecision(born, gatev1.ApprovalApproved, "")
	born.Status.Decision.User = approver
	must(t, k8sClient.Create(ctx, born))
	if got := get(ctx, t, born); got.Status.State != gatev1.ApprovalPending || got.Status.Decision != nil || len(got.Status.Conditions) > 0 {
		t.Errorf("an approval was created with status %+v", got.Status)
	}
}

// TestDecisionIdentityMustBeTheRequester: should a mutating webhook that runs after the recorder
// change who decided, the validator refuses the update. (Through the API server the recorder
// always writes the requester, so this is the handler alone.)
func TestDecisionIdentityMustBeTheRequester(t *testing.T) {
	expires := time.Now().Add(time.Hour)
	old := &gatev1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "held"},
		Spec:       gatev1.ToolApprovalSpec{Policy: "default", ExpiresAt: metav1.NewTime(expires)},
		Status:     gatev1.ToolApprovalStatus{State: gatev1.ApprovalPending},
	}
	user := authenticationv1.UserInfo{Username: "alice", UID: "alice-uid", Groups: []string{"team-a", "system:authenticated"}}
	for name, d := range map[string]gatev1.ToolApprovalDecision{
		"another user":  {User: "bob", UID: "alice-uid", Groups: user.Groups},
		"another uid":   {User: "alice", UID: "bob-uid", Groups: user.Groups},
		"more groups":   {User: "alice", UID: "alice-uid", Groups: append(slices.Clone(user.Groups), "system:masters")},
		"no time":       {User: "alice", UID: "alice-uid", Groups: user.Groups, Time: nil},
		"no one at all": {},
	} {
		t.Run(name, func(t *testing.T) {
			ta := old.DeepCopy()
			setDecision(ta, gatev1.ApprovalApproved, "")
			if name != "no time" && name != "no one at all" {
				d.Time = &metav1.Time{Time: time.Now()}
			}
			ta.Status.Decision = &d
			resp := (&ApprovalValidator{}).Handle(context.Background(), statusUpdate(t, old, ta, user))
			if resp.Allowed || !strings.Contains(resp.Result.Message, "status.decision must name the user who makes the decision (alice)") {
				t.Errorf("allowed %v: %q", resp.Allowed, resp.Result.Message)
			}
		})
	}
}

// statusUpdate is updateRequest on the status subresource, made by user.
func statusUpdate(t *testing.T, old, ta *gatev1.ToolApproval, user authenticationv1.UserInfo) admission.Request {
	t.Helper()
	r := updateRequest(t, old, ta)
	r.SubResource, r.Name, r.UserInfo = "status", ta.Name, user
	return r
}

// TestDecisionRecordedAfterTheDeadline: an approval whose recorded time (the recorder's clock,
// which the confirmer reads) is not before spec.expiresAt is refused even when the validator's
// own clock is still before it (two manager replicas, two clocks): the approval would be
// recorded and then not count, a record saying Approved for a call denied at its deadline.
func TestDecisionRecordedAfterTheDeadline(t *testing.T) {
	expires := time.Now().Add(time.Minute)
	old := &gatev1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "held"},
		Spec:       gatev1.ToolApprovalSpec{Policy: "default", ExpiresAt: metav1.NewTime(expires)},
		Status:     gatev1.ToolApprovalStatus{State: gatev1.ApprovalPending},
	}
	user := authenticationv1.UserInfo{Username: "alice", UID: "alice-uid", Groups: []string{"system:authenticated"}}
	ta := old.DeepCopy()
	setDecision(ta, gatev1.ApprovalApproved, "")
	ta.Status.Decision = &gatev1.ToolApprovalDecision{User: user.Username, UID: user.UID, Groups: user.Groups, Time: &metav1.Time{Time: expires}}
	allowAll := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
		obj.(*authorizationv1.LocalSubjectAccessReview).Status.Allowed = true
		return nil
	}}).Build()
	v := &ApprovalValidator{Reviews: allowAll, Clock: testingclock.NewFakePassiveClock(expires.Add(-10 * time.Second))}
	resp := v.Handle(context.Background(), statusUpdate(t, old, ta, user))
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "arrived after the deadline") {
		t.Fatalf("allowed %v: %+v", resp.Allowed, resp.Result)
	}
}

// TestClusterLayerAskNeedsApproveOnTheClusterPolicy: a call a cluster layer held
// (spec.clusterPolicy) is not the namespace's approvers' to answer: alice, who may approve the
// namespace policy, is refused; a user with approve on the cluster policy in this namespace
// decides it.
func TestClusterLayerAskNeedsApproveOnTheClusterPolicy(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := approvalNamespace(ctx, t)
	must(t, k8sClient.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "baseline-approver"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{gatev1.GroupVersion.Group}, Resources: []string{"clusterharnessagentpolicies"}, ResourceNames: []string{"baseline"}, Verbs: []string{gatev1.ApproveVerb}},
			{APIGroups: []string{gatev1.GroupVersion.Group}, Resources: []string{"toolapprovals/status"}, Verbs: []string{"get", "update"}},
			{APIGroups: []string{gatev1.GroupVersion.Group}, Resources: []string{"toolapprovals"}, Verbs: []string{"get"}},
		},
	}))
	bind(ctx, t, ns, "Role", "baseline-approver", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "platform-oncall"})
	waitAllowed(ctx, t, "platform-oncall", ns, gatev1.ApproveVerb, "clusterharnessagentpolicies", "baseline")

	ta := &gatev1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-held", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: gatev1.GroupVersion.String(), Kind: "SessionConfirmer", Name: confirmer, UID: types.UID("0b7e4a5c-confirmer"), Controller: new(true),
		}}},
		Spec: gatev1.ToolApprovalSpec{
			Surface: gatev1.SurfaceManagedAgents, Policy: "default", ClusterPolicy: "baseline", SessionID: "sesn_01", ToolUseID: "toolu_cluster", Tool: "web_fetch",
			Rule: "fetch-asks", Reason: "the platform asks for fetches",
			Input:     gatev1.ToolApprovalInput{Size: 2, SHA256: strings.Repeat("ab", 32)},
			ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour)),
		},
	}
	must(t, k8sClient.Create(ctx, ta))
	ta.Status.State = gatev1.ApprovalPending
	must(t, asConfirmer(t, ns).Status().Update(ctx, ta))

	refusedWith(t, decide(ctx, as(t, approver, ""), get(ctx, t, ta), gatev1.ApprovalApproved, "mine to approve"),
		"may not approve calls held by ClusterHarnessAgentPolicy baseline: needs the verb approve on clusterharnessagentpolicies/baseline")
	if err := decide(ctx, as(t, "platform-oncall", ""), get(ctx, t, ta), gatev1.ApprovalApproved, "the platform allows it once"); err != nil {
		t.Fatalf("the cluster policy's approver was refused: %v", err)
	}
	if got := get(ctx, t, ta); got.Status.State != gatev1.ApprovalApproved || got.Status.Decision.User != "platform-oncall" {
		t.Errorf("stored %s by %+v", got.Status.State, got.Status.Decision)
	}
}
