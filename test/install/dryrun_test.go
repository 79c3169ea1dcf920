package install_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/intutic/gate-operator/internal/testutil"
)

func TestHelmManifestsServerSideDryRun(t *testing.T) {
	c := apiServer(t)
	// The chart does not create its release namespace: `helm install --namespace` does (with
	// --create-namespace). Create it for real, as restricted as config/default's.
	applyForReal(t, c, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": namespace, "labels": map[string]any{
			"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
		}},
	}})
	t.Run("default values", func(t *testing.T) {
		dryRunAll(t, c, helmTemplate(t))
	})
	t.Run("non-default values", func(t *testing.T) {
		objs := helmTemplate(t, "-f", writeValues(t, customValues))
		var rest []*unstructured.Unstructured
		// The dashboard's ConfigMap goes where Grafana's sidecar looks.
		applyForReal(t, c, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "grafana"},
		}})
		for _, o := range objs {
			// No Prometheus Operator CRDs in this API server.
			switch o.GetKind() {
			case "ServiceMonitor", "PrometheusRule":
			default:
				rest = append(rest, o)
			}
		}
		if len(rest) != len(objs)-2 {
			t.Fatalf("expected exactly one ServiceMonitor and one PrometheusRule to leave out, left %d of %d", len(rest), len(objs))
		}
		dryRunAll(t, c, rest)
	})
	t.Run("watchNamespaces", func(t *testing.T) {
		for _, ns := range []string{"team-a", "team-b"} {
			applyForReal(t, c, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns},
			}})
		}
		objs := helmTemplate(t, "--set", "watchNamespaces={team-a,team-b}")
		if n := len(ofKind(objs, "RoleBinding")); n != 5 {
			t.Fatalf("%d RoleBindings rendered, want 5 (two namespaces, leader election, the egress canary Service and the webhook certificate)", n)
		}
		dryRunAll(t, c, objs)
	})
}

func TestKustomizeServerSideDryRun(t *testing.T) {
	objs := kustomize(t)
	c := apiServer(t)
	dryRunAll(t, c, objs)

	// The PodSecurity check in dryRunAll has teeth: the same Deployment without its security
	// settings draws a warning from the restricted namespace.
	dep := find(t, objs, "Deployment", "gate-operator").DeepCopy()
	unstructured.RemoveNestedField(dep.Object, "spec", "template", "spec", "securityContext")
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	delete(containers[0].(map[string]any), "securityContext")
	if err := unstructured.SetNestedSlice(dep.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	warnings.Take()
	if err := dryRun(testutil.Context(t, 60*time.Second), c, dep); err != nil {
		t.Fatalf("dry-run of the insecure Deployment: %v", err)
	}
	if w := warnings.Take(); !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "PodSecurity") }) {
		t.Fatalf("a Deployment without securityContext in the restricted namespace drew no PodSecurity warning (got %q): the warning check proves nothing", w)
	}
}

// dryRunAll applies Namespaces and CRDs for real (the API server must know them for the rest to
// be judged), then every other object with a server-side dry run, and requires neither an error
// nor a warning (PodSecurity admission warns about a Deployment whose pods the namespace's
// enforced level would reject) and that nothing was persisted.
func dryRunAll(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := testutil.Context(t, 60*time.Second)
	var rest []*unstructured.Unstructured
	var crds []string
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			applyForReal(t, c, o)
		case "CustomResourceDefinition":
			applyForReal(t, c, o)
			crds = append(crds, o.GetName())
		default:
			rest = append(rest, o)
		}
	}
	for _, name := range crds {
		waitEstablished(t, c, name)
	}
	if len(rest) == 0 {
		t.Fatalf("nothing to dry-run")
	}
	for _, o := range rest {
		warnings.Take()
		if err := dryRun(ctx, c, o.DeepCopy()); err != nil {
			t.Fatalf("server-side dry-run apply of %s %s/%s: %v\n%s", o.GetKind(), o.GetNamespace(), o.GetName(), err, toYAML(t, o.Object))
		}
		if w := warnings.Take(); len(w) > 0 {
			t.Errorf("server-side dry-run apply of %s %s/%s warned: %q", o.GetKind(), o.GetNamespace(), o.GetName(), w)
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s/%s exists after a dry run (get: %v)", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

func dryRun(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	// client.Apply (the SSA patch type) on unstructured objects: deprecated in favour of
	// client.Client.Apply with apply configurations, which unstructured manifests are not.
	return c.Patch(ctx, o, client.Apply, client.DryRunAll, client.FieldOwner("test"), client.ForceOwnership) //nolint:staticcheck
}

func applyForReal(t *testing.T, c client.Client, o *unstructured.Unstructured) {
	t.Helper()
	if err := c.Patch(testutil.Context(t, 60*time.Second), o.DeepCopy(), client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil { //nolint:staticcheck
		t.Fatalf("server-side apply of %s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

func waitEstablished(t *testing.T, c client.Client, name string) {
	t.Helper()
	ctx := testutil.Context(t, 60*time.Second)
	for {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		err := c.Get(ctx, client.ObjectKey{Name: name}, crd)
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, cond := range conds {
				if m, _ := cond.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD %s not Established: %v (last get error: %v)", name, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
