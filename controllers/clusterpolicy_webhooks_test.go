package controllers

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/testutil"
)

// testStaticWebhooks is the name of the manager's own configurations in the envtest suite; the
// cluster policies' entries go to testStaticWebhooks + ClusterPolicyWebhooksSuffix.
const testStaticWebhooks = "envtest-gate-operator"

// createTestWebhookConfigurations creates what the install creates: the manager's own
// configurations with their pod entries (their service does not exist in the envtest API
// server, and their namespaceSelector matches no namespace: they are never called) and the
// cluster policies' configurations, empty; all deleted when the test ends, so no entry with
// failurePolicy Fail outlives it.
func createTestWebhookConfigurations(t *testing.T, ca []byte) {
	ctx := testutil.Context(t, 30*time.Second)
	cc := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{CABundle: ca, Service: &admissionregistrationv1.ServiceReference{
			Namespace: "gate-system", Name: "gate-operator-webhook", Path: ptr.To(path), Port: ptr.To[int32](443)}}
	}
	none := &metav1.LabelSelector{MatchLabels: map[string]string{"envtest": "never"}}
	objs := []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: testStaticWebhooks},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: staticPodMutatingEntry, ClientConfig: cc("/mutate-pod"),
				NamespaceSelector: none, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}}}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: testStaticWebhooks},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: staticPodValidatingEntry, ClientConfig: cc("/validate-pod"),
				NamespaceSelector: none, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}}}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: testStaticWebhooks + ClusterPolicyWebhooksSuffix}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: testStaticWebhooks + ClusterPolicyWebhooksSuffix}},
	}
	for _, o := range objs {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := k8sClient.Delete(context.Background(), o); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestClusterPolicyWebhookEntries: each cluster policy gets one mutating and one validating pod
// entry, failurePolicy Fail, with its own selectors narrowed to leave out the system namespaces,
// the operator's, and the pods with the opt-in label, and the manager's own service and CA
// bundle, which it follows when it changes; deleting the policy removes its entries.
func TestClusterPolicyWebhookEntries(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	createTestWebhookConfigurations(t, []byte("envtest-ca-1"))
	// Reconciled by hand, not by the suite's manager: its entries would send the pods of the
	// other tests' cluster policies to a webhook the envtest API server cannot reach.
	r := &ClusterPolicyWebhooksReconciler{Client: k8sClient, Static: testStaticWebhooks, Configuration: testStaticWebhooks + ClusterPolicyWebhooksSuffix}
	reconcileNow := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, clusterWebhooksKey); err != nil {
			t.Fatal(err)
		}
	}
	sel := "hooks-" + rand.String(5)
	c := newClusterPolicy("entries-"+sel, sel)
	c.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	name := c.Name + clusterEntrySuffix
	key := types.NamespacedName{Name: testStaticWebhooks + ClusterPolicyWebhooksSuffix}
	entries := func() (*admissionregistrationv1.MutatingWebhook, *admissionregistrationv1.ValidatingWebhook) {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := k8sClient.Get(ctx, key, m); err != nil {
			t.Fatal(err)
		}
		if err := k8sClient.Get(ctx, key, v); err != nil {
			t.Fatal(err)
		}
		var mw *admissionregistrationv1.MutatingWebhook
		var vw *admissionregistrationv1.ValidatingWebhook
		if i := slices.IndexFunc(m.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == name }); i >= 0 {
			mw = &m.Webhooks[i]
		}
		if i := slices.IndexFunc(v.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == name }); i >= 0 {
			vw = &v.Webhooks[i]
		}
		return mw, vw
	}
	reconcileNow()
	mw, vw := entries()
	if mw == nil || vw == nil {
		t.Fatalf("no entry %s: mutating %v, validating %v", name, mw, vw)
	}
	if *mw.FailurePolicy != admissionregistrationv1.Fail || *vw.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failure policies %s and %s, want Fail", *mw.FailurePolicy, *vw.FailurePolicy)
	}
	if got := mw.ClientConfig.Service; got == nil || ptr.Deref(got.Path, "") != "/mutate-pod" || got.Namespace != "gate-system" || !bytes.Equal(mw.ClientConfig.CABundle, []byte("envtest-ca-1")) {
		t.Errorf("the mutating entry's client config is not the manager's pod entry's: %+v", mw.ClientConfig)
	}
	if got := vw.ClientConfig.Service; got == nil || ptr.Deref(got.Path, "") != "/validate-pod" {
		t.Errorf("the validating entry's client config is not the manager's governed-pods entry's: %+v", vw.ClientConfig)
	}
	wantNS := metav1.LabelSelector{MatchLabels: map[string]string{"fleet-test": sel}, MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"gate-system", "kube-node-lease", "kube-public", "kube-system"}}}}
	wantPods := metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}, MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: gatev1.LabelPolicy, Operator: metav1.LabelSelectorOpDoesNotExist}}}
	for kind, got := range map[string][2]*metav1.LabelSelector{"mutating": {mw.NamespaceSelector, mw.ObjectSelector}, "validating": {vw.NamespaceSelector, vw.ObjectSelector}} {
		if fmt.Sprint(*got[0]) != fmt.Sprint(wantNS) || fmt.Sprint(*got[1]) != fmt.Sprint(wantPods) {
			t.Errorf("%s entry selectors: namespaces %v, pods %v; want %v and %v", kind, *got[0], *got[1], wantNS, wantPods)
		}
	}

	// A new CA bundle in the manager's own configuration reaches the entries.
	static := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := k8sClient.Get(ctx, types.NamespacedName{Name: testStaticWebhooks}, static); err != nil {
		t.Fatal(err)
	}
	static.Webhooks[0].ClientConfig.CABundle = []byte("envtest-ca-2")
	if err := k8sClient.Update(ctx, static); err != nil {
		t.Fatal(err)
	}
	reconcileNow()
	if mw, _ := entries(); mw == nil || !bytes.Equal(mw.ClientConfig.CABundle, []byte("envtest-ca-2")) {
		t.Error("the entry's CA bundle is not the rotated one")
	}

	if err := k8sClient.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		reconcileNow()
		if mw, vw := entries(); mw != nil || vw != nil {
			return fmt.Errorf("the deleted policy's entries are still there")
		}
		return nil
	})
}
