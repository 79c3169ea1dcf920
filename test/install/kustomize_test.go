package install_test

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestKustomizeMatchesChartDefaults: config/default installs what the chart installs with its
// default values (release gate-operator in gate-system): the same CRDs, RBAC rules and pod.
func TestKustomizeMatchesChartDefaults(t *testing.T) {
	kobjs := kustomize(t)
	hobjs := helmTemplate(t)

	if ns := find(t, kobjs, "Namespace", namespace); ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s labels %v: want pod-security.kubernetes.io/enforce=restricted", namespace, ns.GetLabels())
	}
	for _, o := range kobjs {
		if isNamespaced(o) && o.GetNamespace() != namespace {
			t.Errorf("kustomize: %s %s is in namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), namespace)
		}
	}
	bases := generatedCRDs(t)
	kcrds := ofKind(kobjs, "CustomResourceDefinition")
	if len(kcrds) != len(bases) {
		t.Errorf("config/default installs %d CRDs, config/crd/bases has %d: list every base in config/crd/kustomization.yaml", len(kcrds), len(bases))
	}
	for _, crd := range kcrds {
		if base, ok := bases[crd.GetName()]; !ok || !equality.Semantic.DeepEqual(crd.Object, base.Object) {
			t.Errorf("kustomize CRD %s differs from config/crd/bases", crd.GetName())
		}
	}
	checkRBAC(t, kobjs, rbacWant{prefix: "gate-operator", serviceAccount: "gate-operator", metricsAuth: true, webhookCerts: true})

	kdep := deployment(t, kobjs)
	hdep := deployment(t, hobjs)
	checkManagerPod(t, kdep, managerWant{
		replicas: 2, leaderElect: true, image: defaultImage, confirmerImage: defaultConfirmerImage,
		resources: hdep.Spec.Template.Spec.Containers[0].Resources,
	})
	checkAvailability(t, kobjs, availabilityWant{replicas: 2, pdb: true, maxUnavailable: 1, spread: true})
	if !equality.Semantic.DeepEqual(kdep.Spec.Strategy, hdep.Spec.Strategy) || *kdep.Spec.Replicas != *hdep.Spec.Replicas {
		t.Errorf("config/manager/manager.yaml replicas %d and strategy %v differ from the chart's default: %d, %v", *kdep.Spec.Replicas, kdep.Spec.Strategy, *hdep.Spec.Replicas, hdep.Spec.Strategy)
	}
	if !equality.Semantic.DeepEqual(kdep.Spec.Template.Spec, hdep.Spec.Template.Spec) {
		t.Errorf("config/manager/manager.yaml pod spec differs from the chart's default:\nkustomize:\n%s\nhelm:\n%s", toYAML(t, kdep.Spec.Template.Spec), toYAML(t, hdep.Spec.Template.Spec))
	}
	ksvc := checkMetricsService(t, kobjs, kdep)
	hsvc := checkMetricsService(t, hobjs, hdep)
	if !equality.Semantic.DeepEqual(ksvc.Spec.Ports, hsvc.Spec.Ports) || ksvc.Name != hsvc.Name {
		t.Errorf("metrics Service differs: kustomize %s %v, helm %s %v", ksvc.Name, ksvc.Spec.Ports, hsvc.Name, hsvc.Spec.Ports)
	}
	kcanary, hcanary := checkCanaryService(t, kobjs, kdep), checkCanaryService(t, hobjs, hdep)
	if !equality.Semantic.DeepEqual(kcanary.Spec.Ports, hcanary.Spec.Ports) {
		t.Errorf("egress canary Service differs: kustomize %v, helm %v", kcanary.Spec.Ports, hcanary.Spec.Ports)
	}
	for _, name := range []string{"gate-operator-leader-election", "gate-operator-egress-canary"} {
		krole := typed[rbacv1.Role](t, find(t, kobjs, "Role", name))
		hrole := typed[rbacv1.Role](t, find(t, hobjs, "Role", name))
		if !equality.Semantic.DeepEqual(krole.Rules, hrole.Rules) {
			t.Errorf("Role %s rules differ: kustomize %v, helm %v", name, krole.Rules, hrole.Rules)
		}
		krb := typed[rbacv1.RoleBinding](t, find(t, kobjs, "RoleBinding", name))
		hrb := typed[rbacv1.RoleBinding](t, find(t, hobjs, "RoleBinding", name))
		if krb.RoleRef != hrb.RoleRef || !slices.Equal(krb.Subjects, hrb.Subjects) {
			t.Errorf("RoleBinding %s differs: kustomize %v %v, helm %v %v", name, krb.RoleRef, krb.Subjects, hrb.RoleRef, hrb.Subjects)
		}
	}
	for _, name := range []string{"gate-operator-metrics-auth", "gate-operator-metrics-reader", "gate-operator-approver"} {
		kcr := typed[rbacv1.ClusterRole](t, find(t, kobjs, "ClusterRole", name))
		hcr := typed[rbacv1.ClusterRole](t, find(t, hobjs, "ClusterRole", name))
		if !equality.Semantic.DeepEqual(kcr.Rules, hcr.Rules) {
			t.Errorf("ClusterRole %s rules differ: kustomize %v, helm %v", name, kcr.Rules, hcr.Rules)
		}
	}
	if k, h := kinds(kobjs), kinds(hobjs); !slices.Equal(slices.DeleteFunc(k, func(s string) bool { return s == "Namespace" }), h) {
		t.Errorf("config/default installs the kinds %v, the chart %v", k, h)
	}
}

func kustomize(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	out, err := run(t, root, "kubectl", "kustomize", "config/default")
	if err != nil {
		t.Fatalf("kubectl kustomize config/default failed: %v\n%s", err, out)
	}
	return parseManifests(t, "kubectl kustomize config/default", []byte(out))
}
