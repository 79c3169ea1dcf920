package e2e

import (
	"context"
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/localenv"
)

// The platform layout of this test: the SessionConfirmer, its Secrets, its members Lease and its
// ToolApprovals in platformNS (listed in the chart's manager.platformNamespaces, platformValues),
// the policy it answers with in teamNS, where the agent team edits.
const (
	platformNS = "gate-platform"
	teamNS     = "team-a"
)

// platformValues make platformNS a platform namespace of the install.
var platformValues = []string{"--set-json", `manager.platformNamespaces=["` + platformNS + `"]`}

// testPlatformLayout: a SessionConfirmer in the platform namespace answers for the policy of the
// team's namespace; its Deployment is rendered there and mounts the copy of the policy's bundle.
// Users bound to the built-in edit and admin ClusterRoles in the team's namespace read Secrets
// there, but in the platform namespace they may not read the confirmer's key,
// write its members Lease, create or decide its ToolApprovals (the verb approve included), run a
// pod as its ServiceAccount, or change its Deployment or SessionConfirmer. The pods are not awaited: the
// Deployment's spec is what this test checks.
func testPlatformLayout(ctx context.Context, t *testing.T, env *localenv.Env) {
	c := env.Client
	for _, ns := range []string{platformNS, teamNS} {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	p := &gatev1.HarnessAgentPolicy{}
	must(t, env.ReadSample("gate_v1alpha1_harnessagentpolicy.yaml", p))
	p.Namespace = teamNS
	must(t, c.Create(ctx, p))
	const keySecret, webhookSecret = teamNS + "-anthropic", teamNS + "-anthropic-webhook"
	must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: platformNS, Name: keySecret}, Data: map[string][]byte{"api-key": []byte("sk-ant-platform-e2e")}}))
	must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: platformNS, Name: webhookSecret}, Data: map[string][]byte{"signing-key": []byte("whsec_cGxhdGZvcm0gZTJl")}}))
	sc := &gatev1.SessionConfirmer{}
	must(t, env.ReadSample("gate_v1alpha1_sessionconfirmer.yaml", sc))
	sc.Namespace, sc.Name = platformNS, teamNS
	sc.Spec.PolicyRef = gatev1.PolicyReference{Namespace: teamNS, Name: p.Name}
	sc.Spec.Anthropic.BaseURL = localenv.FakeBaseURL
	sc.Spec.Anthropic.APIKeySecretRef.Name = keySecret
	sc.Spec.Webhook = &gatev1.WebhookSpec{SigningKeySecretRef: gatev1.SecretKeyReference{Name: webhookSecret, Key: "signing-key"}}
	sc.Spec.Sessions.AgentIDs = []string{"agent_platform_e2e"}
	one := int32(1)
	sc.Spec.Replicas = &one
	must(t, c.Create(ctx, sc))
	defer func() { must(t, client.IgnoreNotFound(c.Delete(ctx, sc))) }()

	// Rendered in the platform namespace, mounting the copy of the team's bundle.
	got := &gatev1.SessionConfirmer{}
	wait(t, "the platform SessionConfirmer resolves the team's policy", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(sc), got) == nil && got.Status.Policy == teamNS+"/"+p.Name &&
			meta.IsStatusConditionTrue(got.Status.Conditions, gatev1.ConditionPolicyResolved)
	})
	d := &appsv1.Deployment{}
	wait(t, "the platform confirmer's Deployment is rendered", func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: platformNS, Name: sc.Name + "-confirmer"}, d) == nil
	})
	copyName := sc.Name + "-confirmer-bundle"
	mounted := ""
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "bootstrap" && v.ConfigMap != nil {
			mounted = v.ConfigMap.Name
		}
	}
	if mounted != copyName {
		t.Errorf("the platform confirmer mounts ConfigMap %q, want the copy %s", mounted, copyName)
	}
	source, bundle := &corev1.ConfigMap{}, &corev1.ConfigMap{}
	wait(t, "the copy holds the team's bundle", func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: teamNS, Name: p.Name + "-bootstrap"}, source) == nil &&
			c.Get(ctx, types.NamespacedName{Namespace: platformNS, Name: copyName}, bundle) == nil &&
			len(source.Data) > 0 && maps.Equal(source.Data, bundle.Data)
	})

	// The team's editors and admins, bound in the team's namespace.
	for user, role := range map[string]string{"team-editor": "edit", "team-admin": "admin"} {
		must(t, c.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: teamNS, Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}))
	}
	lease := sc.Name + "-confirmer"
	for _, user := range []string{"team-editor", "team-admin"} {
		// What they may do in the team's namespace: read its Secrets (which is why the key is
		// not there), and, as the cluster's built-in roles say, perhaps write its Leases.
		if a := (authorizationv1.ResourceAttributes{Namespace: teamNS, Verb: "get", Resource: "secrets", Name: keySecret}); !allowed(ctx, t, c, user, a) {
			t.Errorf("%s may not get Secrets in %s: the built-in role is not what this test assumes", user, teamNS)
		}
		t.Logf("%s may update Leases in %s: %v", user, teamNS,
			allowed(ctx, t, c, user, authorizationv1.ResourceAttributes{Namespace: teamNS, Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: lease}))
		// What they may not do in the platform namespace.
		for _, a := range []authorizationv1.ResourceAttributes{
			{Namespace: platformNS, Verb: "get", Resource: "secrets", Name: keySecret},
			{Namespace: platformNS, Verb: "list", Resource: "secrets"},
			{Namespace: platformNS, Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: lease},
			{Namespace: platformNS, Verb: "patch", Group: "coordination.k8s.io", Resource: "leases", Name: lease},
			{Namespace: platformNS, Verb: "create", Group: gatev1.GroupVersion.Group, Resource: "toolapprovals"},
			{Namespace: platformNS, Verb: "update", Group: gatev1.GroupVersion.Group, Resource: "toolapprovals", Subresource: "status"},
			{Namespace: platformNS, Verb: "patch", Group: gatev1.GroupVersion.Group, Resource: "toolapprovals", Subresource: "status"},
			{Namespace: platformNS, Verb: "approve", Group: gatev1.GroupVersion.Group, Resource: "harnessagentpolicies", Name: p.Name},
			{Namespace: platformNS, Verb: "create", Resource: "pods"},
			{Namespace: platformNS, Verb: "update", Group: "apps", Resource: "deployments", Name: d.Name},
			{Namespace: platformNS, Verb: "update", Group: gatev1.GroupVersion.Group, Resource: "sessionconfirmers", Name: sc.Name},
		} {
			if allowed(ctx, t, c, user, a) {
				t.Errorf("%s (bound in %s) may %s %s/%s %s in the platform namespace", user, teamNS, a.Verb, a.Resource, a.Subresource, a.Name)
			}
		}
		// And the real requests, as that user.
		as := impersonating(t, env, user)
		if err := as.Get(ctx, types.NamespacedName{Namespace: platformNS, Name: keySecret}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s reading the key Secret: %v, want Forbidden", user, err)
		}
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: platformNS, Name: lease}}
		if err := as.Update(ctx, l); !apierrors.IsForbidden(err) {
			t.Errorf("%s updating the members Lease: %v, want Forbidden", user, err)
		}
		ta := &gatev1.ToolApproval{ObjectMeta: metav1.ObjectMeta{Namespace: platformNS, Name: "forged"}}
		if err := as.Create(ctx, ta); !apierrors.IsForbidden(err) {
			t.Errorf("%s creating a ToolApproval in the platform namespace: %v, want Forbidden", user, err)
		}
	}
}

// allowed asks the API server whether user may do a.
func allowed(ctx context.Context, t *testing.T, c client.Client, user string, a authorizationv1.ResourceAttributes) bool {
	t.Helper()
	r := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:authenticated"}, ResourceAttributes: &a}}
	must(t, c.Create(ctx, r))
	return r.Status.Allowed
}

// impersonating is a client acting as user (in system:authenticated, as a real user is).
func impersonating(t *testing.T, env *localenv.Env, user string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	must(t, err)
	cfg.Impersonate.UserName = user
	cfg.Impersonate.Groups = []string{"system:authenticated"}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	must(t, err)
	return c
}
