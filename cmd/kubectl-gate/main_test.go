package main

// The plugin runs as a function against a real kube-apiserver (envtest, RBAC authorization) with
// the manager's decision webhooks installed from config/webhook and served in this process, as
// users that a kubeconfig impersonates: what the API server and the webhook refuse is what a user
// of `kubectl gate` would read.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/testutil"
	"github.com/intutic/gate-operator/internal/webhook"
	"github.com/intutic/gate-operator/internal/webhook/webhooktest"
)

var (
	admin    client.Client
	adminCfg *rest.Config
	repoRoot string
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// fail reports why the suite cannot run; TestMain exits with its result.
func fail(err error) int {
	fmt.Fprintln(os.Stderr, err)
	return 1
}

func runSuite(m *testing.M) int {
	var err error
	if repoRoot, err = apiservertest.RepoRoot(); err != nil {
		return fail(err)
	}
	validating, mutating, err := webhooktest.Configurations(filepath.Join(repoRoot, "config", "webhook", "webhooks.yaml"))
	if err != nil {
		return fail(err)
	}
	webhooks := envtest.WebhookInstallOptions{ValidatingWebhooks: validating, MutatingWebhooks: mutating}
	return apiservertest.Main(webhooks, func(env *envtest.Environment) int { return runWithAPIServer(m, env) })
}

func runWithAPIServer(m *testing.M, env *envtest.Environment) int {
	var err error
	adminCfg = env.Config
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = gatev1.AddToScheme(scheme)
	wo := env.WebhookInstallOptions
	srv := webhook.NewServer(webhook.Options{
		Host: wo.LocalServingHost, Port: wo.LocalServingPort,
		Certs: webhook.CertOptions{Mode: webhook.CertsExternal, Dir: wo.LocalServingCertDir},
	})
	mgr, err := ctrl.NewManager(adminCfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", WebhookServer: srv,
	})
	if err != nil {
		return fail(err)
	}
	if err := srv.SetupWithManager(mgr, mgr.GetAPIReader()); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "the manager stopped:", err)
		}
	}()
	for deadline := time.Now().Add(time.Minute); srv.StartedChecker()(nil) != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fail(errors.New("the webhooks do not serve"))
		}
	}
	if admin, err = client.New(adminCfg, client.Options{Scheme: scheme}); err != nil {
		return fail(err)
	}
	return m.Run()
}

// kubeconfig writes a kubeconfig for the envtest API server with a context per user (each
// impersonated by the admin credentials, with the namespace ns) and "admin", the current
// context being current.
func kubeconfig(t *testing.T, ns, current string, users ...string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: adminCfg.Host, CertificateAuthorityData: adminCfg.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: adminCfg.CertData, ClientKeyData: adminCfg.KeyData}
	cfg.Contexts["admin"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: ns}
	for _, u := range users {
		cfg.AuthInfos[u] = &clientcmdapi.AuthInfo{ClientCertificateData: adminCfg.CertData, ClientKeyData: adminCfg.KeyData, Impersonate: u, ImpersonateUID: u + "-uid"}
		cfg.Contexts[u] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: u, Namespace: ns}
	}
	cfg.CurrentContext = current
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// gate runs the plugin with args and returns its exit status, stdout and stderr.
func gate(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(ctx, clock.RealClock{}, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// setup makes a namespace where alice is bound to config/rbac's approver ClusterRole and
// mallory may read ToolApprovals and write their status but has no verb approve.
func setup(ctx context.Context, t *testing.T) string {
	t.Helper()
	ns := testutil.CreateNamespace(ctx, t, admin, "gate-plugin-")
	data, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", "approver_role.yaml"))
	must(t, err)
	role := &rbacv1.ClusterRole{}
	must(t, yaml.UnmarshalStrict(data, role))
	if err := admin.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	must(t, admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "status-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{gatev1.GroupVersion.Group}, Resources: []string{"toolapprovals"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{gatev1.GroupVersion.Group}, Resources: []string{"toolapprovals/status"}, Verbs: []string{"update"}},
	}}))
	for user, ref := range map[string]rbacv1.RoleRef{
		"alice":   {APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		"mallory": {APIGroup: rbacv1.GroupName, Kind: "Role", Name: "status-writer"},
	} {
		must(t, admin.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, RoleRef: ref,
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}))
	}
	// RBAC reads bindings through an informer: wait until both hold.
	testutil.Eventually(t, 10*time.Second, func() error {
		for user, verb := range map[string]string{"alice": gatev1.ApproveVerb, "mallory": "update"} {
			res := "harnessagentpolicies"
			if user == "mallory" {
				res = "toolapprovals"
			}
			r := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: gatev1.GroupVersion.Group, Resource: res,
			}}}
			if user == "mallory" {
				r.Spec.ResourceAttributes.Subresource = "status"
			}
			if err := admin.Create(ctx, r); err != nil {
				return err
			}
			if !r.Status.Allowed {
				return fmt.Errorf("%s may not %s %s yet", user, verb, res)
			}
		}
		return nil
	})
	return ns
}

// held creates a Pending ToolApproval of policy default that expires in an hour.
func held(ctx context.Context, t *testing.T, ns, name, tool string, expires time.Duration) *gatev1.ToolApproval {
	t.Helper()
	ta := &gatev1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gatev1.ToolApprovalSpec{
			Surface: gatev1.SurfaceManagedAgents, Policy: "default", SessionID: "sesn_" + name, ToolUseID: "toolu_" + name, Tool: tool,
			Rule: "ask-" + tool, Input: gatev1.ToolApprovalInput{Size: 2, SHA256: strings.Repeat("c0", 32)},
			ExpiresAt: metav1.NewTime(time.Now().Add(expires)),
		},
	}
	must(t, admin.Create(ctx, ta))
	ta.Status.State = gatev1.ApprovalPending
	must(t, admin.Status().Update(ctx, ta))
	return ta
}

func stored(ctx context.Context, t *testing.T, ns, name string) *gatev1.ToolApproval {
	t.Helper()
	ta := &gatev1.ToolApproval{}
	must(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ta))
	return ta
}

// TestApproveDenyPending: an approver lists what waits in the namespace of their current
// context, approves one call and denies another; each is written with its condition and
// message and recorded as theirs. A user without the verb reads the webhook's refusal as it is,
// and a second answer is refused. --kubeconfig, --context and -n pick the cluster, user and
// namespace as kubectl's do.
func TestApproveDenyPending(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := setup(ctx, t)
	held(ctx, t, ns, "fetch", "web_fetch", time.Hour)
	held(ctx, t, ns, "deploy", "deployService", 10*time.Minute)
	t.Setenv("KUBECONFIG", kubeconfig(t, ns, "alice", "alice", "mallory"))

	code, out, errOut := gate(ctx, "pending")
	if code != exitOK {
		t.Fatalf("pending: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAMESPACE NAME TOOL POLICY RULE SESSION AGE EXPIRES-IN" {
		t.Fatalf("pending printed:\n%s", out)
	}
	// The one that expires first comes first.
	for i, want := range [][]string{{ns, "deploy", "deployService", "default", "ask-deployService", "sesn_deploy"}, {ns, "fetch", "web_fetch", "default", "ask-web_fetch", "sesn_fetch"}} {
		f := strings.Fields(lines[i+1])
		if len(f) != 8 || strings.Join(f[:6], " ") != strings.Join(want, " ") || !strings.Contains(f[7], "m") || strings.Contains(f[7], "h") {
			t.Errorf("row %d %q, want %v with an age and an expiry in minutes", i+1, lines[i+1], want)
		}
	}

	// mallory may write the status but not approve: the webhook's refusal, as it is.
	code, out, errOut = gate(ctx, "deny", "deploy", "--context", "mallory")
	want := "user mallory may not deny calls of policy " + ns + "/default: needs the verb approve on harnessagentpolicies/default in namespace " + ns + " (bind the ClusterRole gate-operator-approver)"
	if code != exitFailed || out != "" || !strings.Contains(errOut, `admission webhook "toolapprovals.gate.intutic.io" denied the request: `+want) {
		t.Errorf("mallory's deny: exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, want)
	}

	code, out, errOut = gate(ctx, "approve", "fetch", "--message", "our docs site")
	if code != exitOK || out != "toolapproval.gate.intutic.io/fetch approved\n" {
		t.Fatalf("approve: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	checkDecision(t, stored(ctx, t, ns, "fetch"), gatev1.ApprovalApproved, gatev1.ReasonApprovedByUser, "our docs site")

	// -n and an explicit --kubeconfig beat the context's namespace and $KUBECONFIG.
	other := kubeconfig(t, "default", "admin", "alice")
	code, out, errOut = gate(ctx, "deny", "deploy", "-n", ns, "--kubeconfig", other, "--context=alice", "-m", "not today")
	if code != exitOK || out != "toolapproval.gate.intutic.io/deploy denied\n" {
		t.Fatalf("deny: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	checkDecision(t, stored(ctx, t, ns, "deploy"), gatev1.ApprovalDenied, gatev1.ReasonDeniedByUser, "not today")

	// A second answer is refused; nothing is pending any more.
	if code, _, errOut = gate(ctx, "deny", "fetch"); code != exitFailed || !strings.Contains(errOut, "is already Approved by alice: no change after a decision") {
		t.Errorf("a second answer: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut = gate(ctx, "pending"); code != exitOK || out != "" || errOut != "No pending ToolApprovals in namespace "+ns+".\n" {
		t.Errorf("pending after both answers: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// An approval that does not exist.
	if code, _, errOut = gate(ctx, "approve", "nothing"); code != exitFailed || !strings.Contains(errOut, `"nothing" not found`) {
		t.Errorf("approving nothing: exit %d, stderr %q", code, errOut)
	}
}

func checkDecision(t *testing.T, ta *gatev1.ToolApproval, state gatev1.ToolApprovalState, reason, message string) {
	t.Helper()
	var cond *metav1.Condition
	for i := range ta.Status.Conditions {
		if ta.Status.Conditions[i].Type == string(state) {
			cond = &ta.Status.Conditions[i]
		}
	}
	d := ta.Status.Decision
	if ta.Status.State != state || cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != reason ||
		d == nil || d.User != "alice" || d.UID != "alice-uid" || d.Message != message || d.Time == nil {
		t.Errorf("%s: state %s, condition %+v, decision %+v; want %s with condition reason %s, by alice (alice-uid), saying %q",
			ta.Name, ta.Status.State, cond, d, state, reason, message)
	}
}

// TestPendingAllNamespaces: -A lists every namespace's pending approvals, and only pending ones.
func TestPendingAllNamespaces(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	a, b := setup(ctx, t), setup(ctx, t)
	held(ctx, t, a, "one", "web_fetch", time.Hour)
	held(ctx, t, b, "two", "bash", time.Hour)
	done := held(ctx, t, b, "done", "bash", time.Hour)
	must(t, decide(ctx, admin, done, gatev1.ApprovalApproved, "", time.Now()))
	t.Setenv("KUBECONFIG", kubeconfig(t, a, "admin"))

	code, out, errOut := gate(ctx, "pending", "-A")
	if code != exitOK {
		t.Fatalf("pending -A: exit %d: %s", code, errOut)
	}
	rows := map[string]string{} // name: namespace
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) == 8 {
			rows[f[1]] = f[0]
		}
	}
	if len(rows) < 2 || rows["one"] != a || rows["two"] != b || rows["done"] != "" {
		t.Errorf("pending -A printed (want one in %s, two in %s, not done):\n%s", a, b, out)
	}
}

// TestImpersonation: --as and --as-group act as another user, as kubectl's flags do: the
// decision is refused or recorded as that user's.
func TestImpersonation(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := setup(ctx, t)
	held(ctx, t, ns, "fetch", "web_fetch", time.Hour)
	t.Setenv("KUBECONFIG", kubeconfig(t, ns, "admin"))
	if code, _, errOut := gate(ctx, "approve", "fetch", "--as", "mallory"); code != exitFailed || !strings.Contains(errOut, "user mallory may not approve") {
		t.Errorf("approve --as mallory: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := gate(ctx, "approve", "fetch", "--as", "alice", "--as-group", "reviewers", "-m", "ok"); code != exitOK {
		t.Fatalf("approve --as alice: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	got := stored(ctx, t, ns, "fetch")
	if d := got.Status.Decision; got.Status.State != gatev1.ApprovalApproved || d == nil || d.User != "alice" || !slices.Contains(d.Groups, "reviewers") {
		t.Errorf("the decision as alice: %+v", got.Status)
	}
}

// TestConcurrentDecisionConflicts: a decision written from a stale read of the approval (someone
// answered in between) fails with a Conflict that says so, and the first answer stands.
func TestConcurrentDecisionConflicts(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := setup(ctx, t)
	ta := held(ctx, t, ns, "raced", "web_fetch", time.Hour)
	stale := ta.DeepCopy()
	must(t, decide(ctx, admin, ta, gatev1.ApprovalDenied, "first", time.Now()))
	err := decide(ctx, admin, stale, gatev1.ApprovalApproved, "second", time.Now())
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "changed while you decided") {
		t.Fatalf("the stale decision: %v; want a Conflict", err)
	}
	if got := stored(ctx, t, ns, "raced"); got.Status.State != gatev1.ApprovalDenied || got.Status.Decision.Message != "first" {
		t.Errorf("the first answer did not stand: %+v", got.Status)
	}
}

// TestUsage: wrong command lines exit 2 with the usage.
func TestUsage(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	for _, args := range [][]string{nil, {"approve"}, {"deny", "a", "b"}, {"pending", "x"}, {"certify"}, {"approve", "x", "--bogus"}} {
		if code, _, errOut := gate(ctx, args...); code != exitUsage || !strings.Contains(errOut+usage, "Usage:") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}
	if code, out, _ := gate(ctx, "help"); code != exitOK || out != usage {
		t.Errorf("help: exit %d, %q", code, out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
