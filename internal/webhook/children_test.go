package webhook

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/testutil"
)

// managerServiceAccount is the manager's user in config/ (config/rbac/service_account.yaml, in
// gate-system).
const managerServiceAccount = "system:serviceaccount:gate-system:gate-operator"

// TestOnlyTheManagerWritesItsChildren: with config/admission-policies loaded
// (managed-children.yaml), a user whose Role lets it write every ConfigMap and NetworkPolicy of
// its namespace (as the built-in edit and admin roles do), and the cluster admin too, cannot
// update, patch or delete (one or a collection) a ConfigMap or NetworkPolicy labelled
// managed-by gate-operator, remove the label, put it on their own object or create one with
// it; the manager's ServiceAccount can do all of that; the garbage collector may delete them
// and remove an owner reference, not create them; the namespace controller may delete them
// once their namespace is being deleted, not before; objects without the label are unaffected.
func TestOnlyTheManagerWritesItsChildren(t *testing.T) {
	ctx := testutil.Context(t, 2*time.Minute)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "children-")
	const (
		gc           = "system:serviceaccount:kube-system:generic-garbage-collector"
		nsController = "system:serviceaccount:kube-system:namespace-controller"
	)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(k8sClient.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "children-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete", "deletecollection"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete", "deletecollection"}},
	}}))
	must(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "children-writer"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "children-writer"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"},
			{Kind: rbacv1.ServiceAccountKind, Name: "gate-operator", Namespace: "gate-system"},
			{Kind: rbacv1.ServiceAccountKind, Name: "generic-garbage-collector", Namespace: "kube-system"},
			{Kind: rbacv1.ServiceAccountKind, Name: "namespace-controller", Namespace: "kube-system"},
		}}))
	as := func(user string) client.Client {
		cfg := rest.CopyConfig(testConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		must(err)
		return c
	}
	alice, manager, collector := as("alice"), as(managerServiceAccount), as(gc)
	managed := map[string]string{gatev1.LabelManagedBy: gatev1.ManagedByValue, gatev1.LabelPolicy: "coding-agents"}
	configMap := func(name string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: map[string]string{"policy-snapshot.rules": "[]"}}
	}
	networkPolicy := func(name string, labels map[string]string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		}}
	}
	denied := func(err error) error {
		if err == nil {
			return fmt.Errorf("allowed")
		}
		if !strings.Contains(err.Error(), "managed-by: gate-operator") || !strings.Contains(err.Error(), managerServiceAccount) {
			return fmt.Errorf("refused, but not by the policy: %v", err)
		}
		return nil
	}
	// The policy takes effect asynchronously (its expressions are type-checked first).
	testutil.Eventually(t, time.Minute, func() error {
		return denied(alice.Create(ctx, configMap("probe", managed), client.DryRunAll))
	})

	// The manager renders its children.
	must(manager.Create(ctx, configMap("coding-agents-bootstrap", managed)))
	must(manager.Create(ctx, networkPolicy("coding-agents-egress", managed)))
	must(alice.Create(ctx, configMap("mine", nil)))
	must(alice.Create(ctx, networkPolicy("mine", nil)))

	get := func(obj client.Object, name string) client.Object {
		t.Helper()
		must(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj))
		return obj
	}
	update := func(c client.Client, obj client.Object, name string, change func(client.Object)) error {
		o := get(obj, name)
		change(o)
		return c.Update(ctx, o)
	}
	setData := func(o client.Object) { o.(*corev1.ConfigMap).Data["policy-snapshot.rules"] = `[{"action":"allow"}]` }
	openEgress := func(o client.Object) {
		o.(*networkingv1.NetworkPolicy).Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	}
	label := func(labels map[string]string) func(client.Object) {
		return func(o client.Object) { o.SetLabels(labels) }
	}
	patch := func(c client.Client, obj client.Object, name, body string) error {
		o := get(obj, name)
		return c.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(body)))
	}
	const openPatch = `{"spec":{"egress":[{}]}}`
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"alice updates the bundle", update(alice, &corev1.ConfigMap{}, "coding-agents-bootstrap", setData)},
		{"alice patches the bundle", patch(alice, &corev1.ConfigMap{}, "coding-agents-bootstrap", `{"data":{"policy-snapshot.rules":"[]\n"}}`)},
		{"alice removes the bundle's label", patch(alice, &corev1.ConfigMap{}, "coding-agents-bootstrap", `{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}}}`)},
		{"alice deletes the bundle", alice.Delete(ctx, configMap("coding-agents-bootstrap", nil))},
		{"alice updates the NetworkPolicy", update(alice, &networkingv1.NetworkPolicy{}, "coding-agents-egress", openEgress)},
		{"alice patches the NetworkPolicy", patch(alice, &networkingv1.NetworkPolicy{}, "coding-agents-egress", openPatch)},
		{"alice deletes the NetworkPolicy", alice.Delete(ctx, networkPolicy("coding-agents-egress", nil))},
		{"alice deletes the labelled ConfigMaps of the namespace", alice.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns), client.MatchingLabels(managed))},
		{"alice deletes the labelled NetworkPolicies of the namespace", alice.DeleteAllOf(ctx, &networkingv1.NetworkPolicy{}, client.InNamespace(ns), client.MatchingLabels(managed))},
		{"alice labels her ConfigMap", update(alice, &corev1.ConfigMap{}, "mine", label(managed))},
		{"alice labels her NetworkPolicy", update(alice, &networkingv1.NetworkPolicy{}, "mine", label(managed))},
		{"alice creates a labelled ConfigMap", alice.Create(ctx, configMap("forged-bootstrap", managed))},
		{"alice creates a labelled NetworkPolicy", alice.Create(ctx, networkPolicy("forged-egress", managed))},
		{"the cluster admin updates the bundle", update(k8sClient, &corev1.ConfigMap{}, "coding-agents-bootstrap", setData)},
		{"the cluster admin deletes the NetworkPolicy", k8sClient.Delete(ctx, networkPolicy("coding-agents-egress", nil))},
		{"the garbage collector creates a labelled ConfigMap", collector.Create(ctx, configMap("forged-bootstrap", managed))},
		{"the namespace controller deletes the bundle while the namespace stays", as(nsController).Delete(ctx, configMap("coding-agents-bootstrap", nil))},
	} {
		if err := denied(tc.err); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}

	// Objects without the label: the policy does not look at them.
	if err := update(alice, &corev1.ConfigMap{}, "mine", setData); err != nil {
		t.Errorf("alice could not update her ConfigMap: %v", err)
	}
	if err := patch(alice, &networkingv1.NetworkPolicy{}, "mine", openPatch); err != nil {
		t.Errorf("alice could not patch her NetworkPolicy: %v", err)
	}
	if err := alice.Delete(ctx, networkPolicy("mine", nil)); err != nil {
		t.Errorf("alice could not delete her NetworkPolicy: %v", err)
	}

	// The manager updates, patches, relabels and deletes its children.
	if err := update(manager, &corev1.ConfigMap{}, "coding-agents-bootstrap", setData); err != nil {
		t.Errorf("the manager could not update its bundle: %v", err)
	}
	if err := patch(manager, &networkingv1.NetworkPolicy{}, "coding-agents-egress", openPatch); err != nil {
		t.Errorf("the manager could not patch its NetworkPolicy: %v", err)
	}
	if err := update(manager, &corev1.ConfigMap{}, "mine", label(managed)); err != nil {
		t.Errorf("the manager could not label a ConfigMap: %v", err)
	}
	if err := manager.Delete(ctx, configMap("mine", nil)); err != nil {
		t.Errorf("the manager could not delete a labelled ConfigMap: %v", err)
	}

	// The garbage collector removes an owner reference (an owner deleted with
	// --cascade=orphan) and deletes children whose owner is gone.
	owner := configMap("owner", nil)
	must(alice.Create(ctx, owner))
	owned := configMap("owned-bootstrap", managed)
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	must(manager.Create(ctx, owned))
	if err := update(collector, &corev1.ConfigMap{}, owned.Name, func(o client.Object) { o.SetOwnerReferences(nil) }); err != nil {
		t.Errorf("the garbage collector could not remove an owner reference: %v", err)
	}
	if err := collector.Delete(ctx, configMap(owned.Name, nil)); err != nil {
		t.Errorf("the garbage collector could not delete a child: %v", err)
	}
	if err := collector.Delete(ctx, networkPolicy("coding-agents-egress", nil)); err != nil {
		t.Errorf("the garbage collector could not delete a child: %v", err)
	}

	// A namespace being deleted: the namespace controller empties it (envtest runs no
	// namespace controller, so the namespace stays Terminating for the test to act as it).
	must(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	testutil.Eventually(t, 20*time.Second, func() error {
		return as(nsController).Delete(ctx, configMap("coding-agents-bootstrap", nil))
	})
}

// TestClusterLayersAreNotTenantWritable: a bundle that carries a cluster layer is one of the
// manager's children, so a tenant with the ConfigMap rights of the built-in edit and admin
// roles in its namespace can neither rewrite the layer's snapshot or the layers index, nor drop
// them, nor delete the bundle (the e2e checks the same with the real edit and admin roles).
func TestClusterLayersAreNotTenantWritable(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "layers-")
	p := policyWith(ns, "agents", gatev1.Rule{Name: "ok", Tools: []string{"read"}, Action: gatev1.ActionAllow})
	p.Generation = 1
	c := &gatev1.ClusterHarnessAgentPolicy{ObjectMeta: metav1.ObjectMeta{Name: "baseline", Generation: 1}, Spec: gatev1.ClusterHarnessAgentPolicySpec{
		Rules: []gatev1.Rule{{Name: "no-rm", Tools: []string{"bash"}, When: `input.command.startsWith("rm")`, Action: gatev1.ActionBlock, Reason: "rm"}},
	}}
	layer, _, err := bootstrap.ClusterLayerOf(c, "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := bootstrap.BuildLayered(p, bootstrap.Layers{Cluster: []bootstrap.ClusterLayer{layer}}, bootstrap.Published{}, bootstrap.Options{})
	if err != nil || res.HeldBack() {
		t.Fatal(err, res.CompileErrs, res.RenderErr)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bootstrap.ConfigMapName(p.Name),
		Labels: map[string]string{gatev1.LabelManagedBy: gatev1.ManagedByValue, gatev1.LabelPolicy: p.Name}}, Data: res.Bundle.Data}
	cfg := rest.CopyConfig(testConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: managerServiceAccount}
	manager, err := client.New(cfg, client.Options{Scheme: scheme})
	must(t, err)
	// The ConfigMap rights of the built-in edit and admin roles (which envtest cannot aggregate:
	// it runs no kube-controller-manager), for the tenant and the manager alike.
	must(t, k8sClient.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "configmap-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete", "deletecollection"}},
	}}))
	must(t, k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "configmap-writer"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmap-writer"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"},
			{Kind: rbacv1.ServiceAccountKind, Name: "gate-operator", Namespace: "gate-system"},
		}}))
	probeCfg := rest.CopyConfig(testConfig)
	probeCfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant"}
	probe, err := client.New(probeCfg, client.Options{Scheme: scheme})
	must(t, err)
	// The policy takes effect asynchronously (its expressions are type-checked first).
	testutil.Eventually(t, time.Minute, func() error {
		if err := probe.Create(ctx, cm.DeepCopy(), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "managed-by: gate-operator") {
			return fmt.Errorf("a tenant's create of a managed ConfigMap: %v", err)
		}
		return nil
	})
	testutil.Eventually(t, 10*time.Second, func() error { return manager.Create(ctx, cm.DeepCopy()) })
	for _, user := range []string{"tenant"} {
		cfg := rest.CopyConfig(testConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		tenant, err := client.New(cfg, client.Options{Scheme: scheme})
		must(t, err)
		testutil.Eventually(t, 10*time.Second, func() error { return tenant.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}) }) // RBAC's informer
		for what, edit := range map[string]func(map[string]string){
			"rewrite the cluster layer": func(d map[string]string) { d[gate.ClusterLayerFile("baseline")] = d[bootstrap.KeySnapshot] },
			"drop the layers index":     func(d map[string]string) { delete(d, gate.LayersFileName) },
		} {
			got := &corev1.ConfigMap{}
			must(t, tenant.Get(ctx, client.ObjectKeyFromObject(cm), got))
			edit(got.Data)
			if err := tenant.Update(ctx, got); err == nil || !strings.Contains(err.Error(), "managed-by: gate-operator") {
				t.Errorf("%s could %s: %v", user, what, err)
			}
		}
		if err := tenant.Delete(ctx, cm.DeepCopy()); err == nil {
			t.Errorf("%s deleted the layered bundle", user)
		}
	}
}
