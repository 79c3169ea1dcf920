package membership

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/testutil"
)

// loadMembersLeasePolicy creates the policy and binding of
// config/admission-policies/confirmer-members-lease.yaml, exactly as written.
func loadMembersLeasePolicy(ctx context.Context, t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	root, err := apiservertest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "admission-policies", "confirmer-members-lease.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("the policy file has %d documents, want the policy and its binding", len(docs))
	}
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &policy); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &binding); err != nil {
		t.Fatal(err)
	}
	if policy.Kind != "ValidatingAdmissionPolicy" || binding.Kind != "ValidatingAdmissionPolicyBinding" || binding.Spec.PolicyName != policy.Name {
		t.Fatalf("the policy file holds %s %s and %s %s bound to %s", policy.Kind, policy.Name, binding.Kind, binding.Name, binding.Spec.PolicyName)
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestOnlyTheConfirmerWritesItsMembersLease: with the admission policy loaded, a user whose
// Role lets it write every Lease of the namespace (as the built-in edit role does) cannot
// update, delete or annotate the members Lease, remove its annotation, or put the annotation
// on another Lease; the ServiceAccount named like the Lease can do all of that to its own
// Lease only; a Lease without the annotation is unaffected; the namespace controller may
// delete it once the namespace is being deleted, not before.
func TestOnlyTheConfirmerWritesItsMembersLease(t *testing.T) {
	cfg := apiservertest.Start(t, false)
	admin := kubernetes.NewForConfigOrDie(cfg)
	ctx := testutil.Context(t, 90*time.Second)
	const ns, lease, sa = "agents", "coding-agents-confirmer", "coding-agents-confirmer"
	const nsController = "system:serviceaccount:kube-system:namespace-controller"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "lease-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "lease-writer"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "lease-writer"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"},
			{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns},
			{Kind: rbacv1.ServiceAccountKind, Name: "namespace-controller", Namespace: "kube-system"},
		}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	as := func(user string) coordinationv1client.LeaseInterface {
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: user}
		return kubernetes.NewForConfigOrDie(c).CoordinationV1().Leases(ns)
	}
	alice, confirmer := as("alice"), as("system:serviceaccount:"+ns+":"+sa)
	members := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{Annotation: `{"confirmer-a":"2026-12-01T09:00:00Z acks=confirmer-a"}`}}}
	}
	if _, err := admin.CoordinationV1().Leases(ns).Create(ctx, members(lease), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	loadMembersLeasePolicy(ctx, t, admin)
	denied := func(err error) error {
		if err == nil {
			return fmt.Errorf("allowed")
		}
		if !strings.Contains(err.Error(), Annotation) || !strings.Contains(err.Error(), "system:serviceaccount:"+ns+":") {
			return fmt.Errorf("refused, but not by the policy: %v", err)
		}
		return nil
	}
	edit := func(l coordinationv1client.LeaseInterface, name string, change func(*coordinationv1.Lease), dryRun bool) error {
		got, err := admin.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(got)
		o := metav1.UpdateOptions{}
		if dryRun {
			o.DryRun = []string{metav1.DryRunAll}
		}
		_, err = l.Update(ctx, got, o)
		return err
	}
	forge := func(l *coordinationv1.Lease) { l.Annotations[Annotation] = `{}` }
	// The policy takes effect asynchronously (its expressions are type-checked first).
	testutil.Eventually(t, 30*time.Second, func() error { return denied(edit(alice, lease, forge, true)) })

	for name, err := range map[string]error{
		"update the members":     edit(alice, lease, forge, false),
		"remove the annotation":  edit(alice, lease, func(l *coordinationv1.Lease) { delete(l.Annotations, Annotation) }, false),
		"delete the Lease":       alice.Delete(ctx, lease, metav1.DeleteOptions{}),
		"annotate another Lease": edit(alice, "other", func(l *coordinationv1.Lease) { l.Annotations = map[string]string{Annotation: "{}"} }, false),
		"create an annotated Lease": func() error {
			_, err := alice.Create(ctx, members("forged"), metav1.CreateOptions{})
			return err
		}(),
		"the confirmer annotates another Lease":                         edit(confirmer, "other", func(l *coordinationv1.Lease) { l.Annotations = map[string]string{Annotation: "{}"} }, false),
		"the namespace controller deletes it while the namespace stays": as(nsController).Delete(ctx, lease, metav1.DeleteOptions{}),
	} {
		if err := denied(err); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	// Leases without the annotation: the policy does not look at them.
	holder := "someone"
	if err := edit(alice, "other", func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = &holder }, false); err != nil {
		t.Errorf("alice could not update a Lease without the annotation: %v", err)
	}
	if _, err := alice.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("alice could not create a Lease without the annotation: %v", err)
	}
	if err := alice.Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Errorf("alice could not delete a Lease without the annotation: %v", err)
	}

	// The confirmer's own Lease: it updates, deletes and creates it.
	if err := edit(confirmer, lease, forge, false); err != nil {
		t.Errorf("the confirmer could not update its Lease: %v", err)
	}
	if err := confirmer.Delete(ctx, lease, metav1.DeleteOptions{}); err != nil {
		t.Errorf("the confirmer could not delete its Lease: %v", err)
	}
	if _, err := confirmer.Create(ctx, members(lease), metav1.CreateOptions{}); err != nil {
		t.Errorf("the confirmer could not create its Lease: %v", err)
	}

	// A namespace being deleted: the namespace controller empties it (envtest runs no
	// namespace controller, so the namespace stays Terminating for the test to act as it).
	if err := admin.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error { return as(nsController).Delete(ctx, lease, metav1.DeleteOptions{}) })
}
