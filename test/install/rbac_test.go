package install_test

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestHelmTemplateWatchNamespaces: with watchNamespaces the manager serves only those
// namespaces, and its ClusterRole is bound there alone (one RoleBinding each, no
// ClusterRoleBinding), so none of its namespaced permissions holds elsewhere; the metrics
// auth rights, cluster-scoped requests, stay bound cluster-wide.
func TestHelmTemplateWatchNamespaces(t *testing.T) {
	objs := helmTemplate(t, "-f", writeValues(t, "watchNamespaces: [a, b]\n"))
	checkRBAC(t, objs, rbacWant{prefix: "gate-operator", serviceAccount: "gate-operator", metricsAuth: true, watchNamespaces: []string{"a", "b"}, webhookCerts: true})
	dep := deployment(t, objs)
	checkManagerPod(t, dep, managerWant{
		replicas: 2, leaderElect: true, image: defaultImage, confirmerImage: defaultConfirmerImage, namespaces: "a,b",
		resources: deployment(t, helmTemplate(t)).Spec.Template.Spec.Containers[0].Resources,
	})
	// Everything else stays in the release namespace.
	for _, o := range objs {
		if isNamespaced(o) && o.GetNamespace() != namespace && (o.GetKind() != "RoleBinding" || o.GetName() != "gate-operator-manager") {
			t.Errorf("%s %s is in namespace %q, want the release namespace %q", o.GetKind(), o.GetName(), o.GetNamespace(), namespace)
		}
	}
}

// TestApproverRole: both installs ship the approver ClusterRole bound to nobody and aggregated
// into nothing; the chart's approver.aggregateToAdmin aggregates it into the built-in admin.
func TestApproverRole(t *testing.T) {
	const aggregate = "rbac.authorization.k8s.io/aggregate-to-admin"
	for name, objs := range map[string][]*unstructured.Unstructured{"kustomize": kustomize(t), "helm": helmTemplate(t)} {
		if l := find(t, objs, "ClusterRole", "gate-operator-approver").GetLabels(); l[aggregate] != "" {
			t.Errorf("%s: the approver ClusterRole aggregates into admin by default (labels %v)", name, l)
		}
		for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
			for _, o := range ofKind(objs, kind) {
				if ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); ref == "gate-operator-approver" {
					t.Errorf("%s: %s %s binds the approver ClusterRole; binding it is the user's decision", name, kind, o.GetName())
				}
			}
		}
	}
	objs := helmTemplate(t, "--set", "approver.aggregateToAdmin=true")
	if l := find(t, objs, "ClusterRole", "gate-operator-approver").GetLabels(); l[aggregate] != "true" {
		t.Errorf("approver.aggregateToAdmin=true: labels %v, want %s: \"true\"", l, aggregate)
	}
}

// rbacWant is the RBAC an install should carry.
type rbacWant struct {
	prefix          string // the release's full name: ClusterRoles are <prefix>-manager etc.
	serviceAccount  string
	metricsAuth     bool     // the metrics endpoint authenticates and authorizes (metrics.secure)
	watchNamespaces []string // empty: the manager ClusterRole is bound cluster-wide
	// webhookCerts: the manager keeps its webhook certificate (webhook.enabled without
	// certManager), with a Role on its Secret and a ClusterRole on the webhook configurations.
	webhookCerts bool
	// clusterPolicyWebhooks: the webhooks are on with cert-manager's certificates, so a
	// ClusterRole of its own lets the manager keep the cluster policies' webhook entries.
	clusterPolicyWebhooks bool
}

// clusterPolicyWebhooksRule lets the manager patch the configurations of the cluster policies'
// pod webhook entries, and no others.
func clusterPolicyWebhooksRule(prefix string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"},
		ResourceNames: []string{prefix + "-cluster-policies"}, Verbs: []string{"patch"}}
}

// checkRBAC checks the manager's ClusterRole carries exactly the generated rules and is bound to
// the manager's ServiceAccount cluster-wide, or with watchNamespaces in those namespaces alone;
// that the metrics-auth ClusterRole (never part of the generated one) is bound cluster-wide and
// the metrics-reader ClusterRole is there when the metrics are secure; that the
// leader-election Role grants the Lease and Event verbs leader election uses; and that the
// egress-canary Role grants get on the canary Service alone.
func checkRBAC(t *testing.T, objs []*unstructured.Unstructured, want rbacWant) {
	t.Helper()
	managerRole := want.prefix + "-manager"
	cr := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", managerRole))
	if gen := generatedRules(t); !equality.Semantic.DeepEqual(cr.Rules, gen) {
		t.Errorf("ClusterRole %s rules differ from config/rbac/role.yaml (run `make chart-sync`):\ngot:\n%s\nwant:\n%s", managerRole, toYAML(t, cr.Rules), toYAML(t, gen))
	}
	for _, r := range cr.Rules {
		// Cluster-scoped reviews would not hold through the per-namespace RoleBindings of
		// watchNamespaces; the namespaced LocalSubjectAccessReview of the decision webhook does.
		if slices.Contains(r.APIGroups, "authentication.k8s.io") || slices.Contains(r.APIGroups, "authorization.k8s.io") && !slices.Equal(r.Resources, []string{"localsubjectaccessreviews"}) {
			t.Errorf("ClusterRole %s grants %v: the metrics-auth rules belong in their own ClusterRole, bound cluster-wide", managerRole, r)
		}
	}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: want.serviceAccount, Namespace: namespace}}
	managerRef := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: managerRole}

	crbs := map[string]*rbacv1.ClusterRoleBinding{}
	for _, o := range ofKind(objs, "ClusterRoleBinding") {
		crb := typed[rbacv1.ClusterRoleBinding](t, o)
		crbs[crb.RoleRef.Name] = crb
		if !slices.Equal(crb.Subjects, subject) {
			t.Errorf("ClusterRoleBinding %s binds %v, want %v", crb.Name, crb.Subjects, subject)
		}
	}
	var managerNamespaces []string
	for _, o := range ofKind(objs, "RoleBinding") {
		rb := typed[rbacv1.RoleBinding](t, o)
		if rb.RoleRef == managerRef {
			managerNamespaces = append(managerNamespaces, rb.Namespace)
			if !slices.Equal(rb.Subjects, subject) {
				t.Errorf("RoleBinding %s/%s binds %v, want %v", rb.Namespace, rb.Name, rb.Subjects, subject)
			}
		}
	}
	sort.Strings(managerNamespaces)
	if len(want.watchNamespaces) == 0 {
		if crbs[managerRole] == nil {
			t.Errorf("no ClusterRoleBinding to ClusterRole %s: the manager serves every namespace", managerRole)
		}
		if len(managerNamespaces) > 0 {
			t.Errorf("ClusterRole %s is also bound by RoleBindings in %v", managerRole, managerNamespaces)
		}
	} else {
		if crb := crbs[managerRole]; crb != nil {
			t.Errorf("ClusterRoleBinding %s binds ClusterRole %s cluster-wide, though the manager serves only %v", crb.Name, managerRole, want.watchNamespaces)
		}
		wantNamespaces := slices.Sorted(slices.Values(want.watchNamespaces))
		if !slices.Equal(managerNamespaces, wantNamespaces) {
			t.Errorf("ClusterRole %s is bound by RoleBindings in %v, want exactly %v", managerRole, managerNamespaces, wantNamespaces)
		}
	}

	authRole, readerRole := want.prefix+"-metrics-auth", want.prefix+"-metrics-reader"
	var wantBound []string
	// The approver ClusterRole is always there and never bound by the install.
	approverRole := want.prefix + "-approver"
	wantRoles := []string{managerRole, approverRole}
	if approver := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", approverRole)); !equality.Semantic.DeepEqual(approver.Rules, approverRules) {
		t.Errorf("ClusterRole %s rules %v, want %v", approverRole, approver.Rules, approverRules)
	}
	if len(want.watchNamespaces) == 0 {
		wantBound = append(wantBound, managerRole)
	}
	if want.metricsAuth {
		wantBound = append(wantBound, authRole)
		wantRoles = append(wantRoles, authRole, readerRole)
		auth := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", authRole))
		wantAuth := []rbacv1.PolicyRule{
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		}
		if !equality.Semantic.DeepEqual(auth.Rules, wantAuth) {
			t.Errorf("ClusterRole %s rules %v, want %v", authRole, auth.Rules, wantAuth)
		}
		reader := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", readerRole))
		wantReader := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
		if !equality.Semantic.DeepEqual(reader.Rules, wantReader) {
			t.Errorf("ClusterRole %s rules %v, want %v", readerRole, reader.Rules, wantReader)
		}
	}
	if want.webhookCerts {
		webhookRole := want.prefix + "-webhook"
		wantBound = append(wantBound, webhookRole)
		wantRoles = append(wantRoles, webhookRole)
		cr := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", webhookRole))
		configs := []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}
		wantRules := []rbacv1.PolicyRule{
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: configs, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: configs, ResourceNames: []string{want.prefix}, Verbs: []string{"update"}},
			clusterPolicyWebhooksRule(want.prefix),
		}
		if !equality.Semantic.DeepEqual(cr.Rules, wantRules) {
			t.Errorf("ClusterRole %s rules %v, want %v", webhookRole, cr.Rules, wantRules)
		}
	} else if want.clusterPolicyWebhooks {
		// With cert-manager there is no rotator RBAC; the manager still keeps the cluster
		// policies' entries.
		role := want.prefix + "-cluster-policy-webhooks"
		wantBound = append(wantBound, role)
		wantRoles = append(wantRoles, role)
		cr := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", role))
		configs := []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}
		wantRules := []rbacv1.PolicyRule{
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: configs, Verbs: []string{"get", "list", "watch"}},
			clusterPolicyWebhooksRule(want.prefix),
		}
		if !equality.Semantic.DeepEqual(cr.Rules, wantRules) {
			t.Errorf("ClusterRole %s rules %v, want %v", role, cr.Rules, wantRules)
		}
	}
	slices.Sort(wantBound)
	if got := keys(crbs); !slices.Equal(got, wantBound) {
		t.Errorf("ClusterRoleBindings bind the ClusterRoles %v, want %v", got, wantBound)
	}
	var gotRoles []string
	for _, o := range ofKind(objs, "ClusterRole") {
		gotRoles = append(gotRoles, o.GetName())
	}
	slices.Sort(gotRoles)
	slices.Sort(wantRoles)
	if !slices.Equal(gotRoles, wantRoles) {
		t.Errorf("ClusterRoles %v, want %v", gotRoles, wantRoles)
	}

	wantRoleRules := map[string][]rbacv1.PolicyRule{
		want.prefix + "-leader-election": {
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		},
		// The pod webhook reads the egress canary Service's ClusterIP, that Service alone.
		want.prefix + "-egress-canary": {
			{APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: []string{want.prefix + "-egress-canary"}, Verbs: []string{"get"}},
		},
	}
	if want.webhookCerts {
		wantRoleRules[want.prefix+"-webhook-cert"] = []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{want.prefix + "-webhook-cert"}, Verbs: []string{"update"}},
		}
	}
	roles := ofKind(objs, "Role")
	if len(roles) != len(wantRoleRules) {
		t.Fatalf("%d Roles, want %d (%v)", len(roles), len(wantRoleRules), keys(wantRoleRules))
	}
	for _, o := range roles {
		role := typed[rbacv1.Role](t, o)
		wantRules, ok := wantRoleRules[role.Name]
		if role.Namespace != namespace || !ok || !equality.Semantic.DeepEqual(role.Rules, wantRules) {
			t.Errorf("Role %s/%s rules %v, want %v in %s", role.Namespace, role.Name, role.Rules, wantRules, namespace)
		}
		roleRef := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name}
		bound := false
		for _, o := range ofKind(objs, "RoleBinding") {
			if rb := typed[rbacv1.RoleBinding](t, o); rb.RoleRef == roleRef {
				bound = rb.Namespace == namespace && slices.Equal(rb.Subjects, subject)
			}
		}
		if !bound {
			t.Errorf("the Role %s is not bound to %v in %s", role.Name, subject, namespace)
		}
	}
	// The manager pod runs as that ServiceAccount.
	if dep := ofKind(objs, "Deployment"); len(dep) == 1 {
		if sa := typed[appsv1.Deployment](t, dep[0]).Spec.Template.Spec.ServiceAccountName; sa != want.serviceAccount {
			t.Errorf("manager runs as ServiceAccount %q, RBAC is bound to %q", sa, want.serviceAccount)
		}
	}
}

// generatedRules reads the rules of the ClusterRole in config/rbac/role.yaml.
func generatedRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	path := filepath.Join(root, "config", "rbac", "role.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range parseManifests(t, path, data) {
		if o.GetKind() == "ClusterRole" && o.GetName() == "gate-operator-manager" {
			return typed[rbacv1.ClusterRole](t, o).Rules
		}
	}
	t.Fatalf("%s has no ClusterRole gate-operator-manager", path)
	return nil
}

// approverRules are what an approver needs: the verb approve on the policies, which the decision
// webhook checks, and reading ToolApprovals and writing their status.
var approverRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"gate.intutic.io"}, Resources: []string{"harnessagentpolicies"}, Verbs: []string{"approve"}},
	{APIGroups: []string{"gate.intutic.io"}, Resources: []string{"toolapprovals"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"gate.intutic.io"}, Resources: []string{"toolapprovals/status"}, Verbs: []string{"get", "update", "patch"}},
}
