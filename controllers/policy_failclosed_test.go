package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestHandEditedConfigMapIsNotKept: while a policy's rules do not compile, the controller
// keeps only the bundle it published itself. A ConfigMap edited by hand, even with a snapshot
// resealed with a valid digest (another policy's, allowing everything), is replaced by the
// bundle that blocks every call, and the status never reports the edited digest.
func TestHandEditedConfigMapIsNotKept(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "policy-")
	for _, tc := range []struct {
		name string
		edit func(data map[string]string)
	}{
		{"resealed allow-all snapshot of another policy", func(data map[string]string) {
			s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "elsewhere/other", Generation: 1, WorkspaceID: "ws_other", DefaultAction: gate.Allow}, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := s.Encode()
			data[bootstrap.KeySnapshot] = string(b)
			data[bootstrap.KeyBootstrapHash] = bootstrap.Hash(data, bootstrap.DefaultMountDir, "ws_other")
		}},
		{"wrapper replaced by exit 0", func(data map[string]string) {
			data[bootstrap.KeyHookScript] = "#!/bin/sh\nexit 0\n"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPolicy(ns, "edited-"+strings.Fields(tc.name)[0])
			if err := k8sClient.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			good := waitCondition(t, p, gatev1.ConditionReady, metav1.ConditionTrue, "")
			updatePolicy(t, good, func(p *gatev1.HarnessAgentPolicy) { p.Spec.Rules[1].When = `!inptu.url.startsWith("x")` })
			waitCondition(t, good, gatev1.ConditionBootstrapRendered, metav1.ConditionFalse, gatev1.ReasonLastGoodKept)

			// The edit, by someone with write access to ConfigMaps, under another field manager.
			cm, _ := children(t, good)
			tc.edit(cm.Data)
			cm.Annotations[gatev1.AnnotationBootstrapHash] = cm.Data[bootstrap.KeyBootstrapHash]
			if err := k8sClient.Update(ctx, cm); err != nil {
				t.Fatal(err)
			}

			got := waitCondition(t, good, gatev1.ConditionBootstrapRendered, metav1.ConditionFalse, gatev1.ReasonPolicyInvalid)
			testutil.Eventually(t, 10*time.Second, func() error {
				cm, _ = children(t, got)
				snap, err := gate.LoadSnapshot([]byte(cm.Data[bootstrap.KeySnapshot]), "ws_123")
				if err != nil || snap.Invalid == "" || snap.Policy != ns+"/"+p.Name {
					return fmt.Errorf("the ConfigMap does not carry this policy's block-everything snapshot: %v %+v", err, snap)
				}
				return nil
			})
			want, err := bootstrap.RenderBlocking("ws_123", []byte(cm.Data[bootstrap.KeySnapshot]), bootstrap.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range want.Data {
				if cm.Data[k] != v {
					t.Errorf("%s is not the operator's rendering:\n%s", k, cm.Data[k])
				}
			}
			got = getPolicy(t, got)
			if snap, _ := gate.LoadSnapshot([]byte(cm.Data[bootstrap.KeySnapshot]), ""); got.Status.SnapshotDigest != snap.Digest || got.Status.BootstrapHash != want.Hash {
				t.Fatalf("status reports %s / %s, the ConfigMap holds %s / %s", got.Status.SnapshotDigest, got.Status.BootstrapHash, snap.Digest, want.Hash)
			}
		})
	}
}

// TestRefusedApplyIsACondition: when the API server refuses the ConfigMap (here an admission
// policy does), the status says so in BootstrapRendered and Ready, with the API server's words,
// instead of going stale.
func TestRefusedApplyIsACondition(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "policy-")
	p := newPolicy(ns, "refused")
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	good := waitCondition(t, p, gatev1.ConditionReady, metav1.ConditionTrue, "")

	const message = "bootstrap ConfigMaps are frozen in this namespace"
	refuseWrites(t, ns, "configmaps", message)

	_, npBefore := children(t, good)
	// The update's rules cannot reach the sandboxes, so neither may its (wider) egress.
	updatePolicy(t, good, func(p *gatev1.HarnessAgentPolicy) {
		p.Spec.Rules[0].Reason = "tightened"
		p.Spec.Egress.AllowedCIDRs = []gatev1.CIDR{"198.51.100.0/24"}
	})
	got := waitCondition(t, good, gatev1.ConditionBootstrapRendered, metav1.ConditionFalse, gatev1.ReasonApplyFailed)
	waitCondition(t, good, gatev1.ConditionEgressEnforced, metav1.ConditionFalse, gatev1.ReasonApplyFailed)
	if _, np := children(t, good); np.ResourceVersion != npBefore.ResourceVersion || len(np.Spec.Egress) != 0 {
		t.Fatalf("the NetworkPolicy changed while the ConfigMap was refused: %+v", np.Spec.Egress)
	}
	c := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionBootstrapRendered)
	if !strings.Contains(c.Message, "ConfigMap "+p.Name+"-bootstrap") || !strings.Contains(c.Message, message) {
		t.Fatalf("the condition does not name the child and the API server's words: %q", c.Message)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionReady)
	if ready.Status != metav1.ConditionFalse || ready.Reason != gatev1.ReasonApplyFailed {
		t.Fatalf("Ready: %+v", ready)
	}
	if got.Status.SnapshotDigest != good.Status.SnapshotDigest || got.Status.BootstrapHash != good.Status.BootstrapHash {
		t.Fatalf("status reports the refused bundle as published: %s / %s", got.Status.SnapshotDigest, got.Status.BootstrapHash)
	}
}

// refuseWrites makes the API server refuse creates and updates of a core resource in one
// namespace, with message, by a ValidatingAdmissionPolicy, and waits until it is in effect.
func refuseWrites(t *testing.T, ns, resource, message string) {
	t.Helper()
	ctx := testutil.Context(t, 60*time.Second)
	group, version := "", "v1"
	if resource == "deployments" {
		group = "apps"
	}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + resource + "-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: new(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update, admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: vap.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        vap.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	if err := k8sClient.Create(ctx, vap); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8sClient.Delete(context.Background(), binding)
		_ = k8sClient.Delete(context.Background(), vap)
	})
	// The admission policy takes effect asynchronously: wait until it refuses a write.
	testutil.Eventually(t, 20*time.Second, func() error {
		var probe client.Object = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
		if resource == "deployments" {
			labels := map[string]string{"app": "probe"}
			probe = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}}},
			}}
		}
		if err := k8sClient.Create(ctx, probe, client.DryRunAll); err == nil || !strings.Contains(err.Error(), message) {
			return fmt.Errorf("the admission policy is not in effect yet: %v", err)
		}
		return nil
	})
}

// TestOversizedBundleIsHeldBack: rules that compile but whose bundle would not fit in a
// ConfigMap (possible only past the schema, with control characters JSON escapes six-fold)
// are not published: the last good bundle stays, or one that blocks every call, and the
// condition says why. Pure: compute decides it before any apply.
func TestOversizedBundleIsHeldBack(t *testing.T) {
	p := newPolicy("agents", "huge")
	p.Generation = 1
	for i := range 300 {
		p.Spec.Rules = append(p.Spec.Rules, gatev1.Rule{Name: fmt.Sprintf("r%d", i), Action: gatev1.ActionBlock, Reason: strings.Repeat("\x01", 1024)})
	}
	r := &HarnessAgentPolicyReconciler{}
	want, err := r.compute(p, &observedState{})
	if err != nil {
		t.Fatal(err)
	}
	if want.build.RenderErr == nil || want.build.Snapshot.Invalid == "" || want.build.Kept {
		t.Fatalf("want the blocking bundle for a bundle that does not fit; renderErr %v, kept %v", want.build.RenderErr, want.build.Kept)
	}
	var rendered metav1.Condition
	for _, c := range policyConditions(p, want, policyApplied{}) {
		if c.Type == gatev1.ConditionBootstrapRendered {
			rendered = c
		}
	}
	if rendered.Status != metav1.ConditionFalse || rendered.Reason != gatev1.ReasonBundleTooLarge || !strings.Contains(rendered.Message, "over the 1048576 bytes a ConfigMap holds") {
		t.Fatalf("BootstrapRendered: %+v", rendered)
	}
}
