package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/testutil"
)

// platformNamespace makes sure the suite's platform namespace exists; each test names its own
// Secrets there, so tests sharing it do not meet.
func platformNamespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testPlatformNamespace}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return testPlatformNamespace
}

// crossNamespaceConfirmer is a SessionConfirmer in ns named after the agents' namespace it
// governs, naming the policy coding-agents there, with Secrets of its own in ns.
func crossNamespaceConfirmer(t *testing.T, ns, agents string) *gatev1.SessionConfirmer {
	t.Helper()
	sc := newConfirmerObj(ns)
	sc.Name = agents
	sc.Spec.PolicyRef = gatev1.PolicyReference{Namespace: agents, Name: "coding-agents"}
	sc.Spec.Anthropic.APIKeySecretRef.Name = agents + "-anthropic"
	sc.Spec.Webhook.SigningKeySecretRef.Name = agents + "-webhook"
	createSecret(t, ns, agents+"-anthropic", "api-key")
	createSecret(t, ns, agents+"-webhook", "signing-key")
	return sc
}

// TestPlatformConfirmerCopiesBundle: a SessionConfirmer in a platform namespace naming a
// policy in the agents' namespace runs its Deployment there, mounting a copy of the policy's
// bootstrap ConfigMap kept in its own namespace (a pod mounts ConfigMaps of its namespace
// only), verbatim; the copy follows a policy edit and is restored when edited by hand. Its
// status names the policy namespace/name.
func TestPlatformConfirmerCopiesBundle(t *testing.T) {
	ctx := testutil.Context(t, 90*time.Second)
	platform := platformNamespace(ctx, t)
	agents := testutil.CreateNamespace(ctx, t, k8sClient, "agents-")
	p := newPolicy(agents, "coding-agents")
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	sc := crossNamespaceConfirmer(t, platform, agents)
	if err := k8sClient.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	got := waitConfirmer(t, sc, gatev1.ConditionPolicyResolved, metav1.ConditionTrue, gatev1.ReasonPolicyResolved)
	if got.Status.Policy != agents+"/coding-agents" {
		t.Errorf("status.policy %q, want %s/coding-agents", got.Status.Policy, agents)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionPolicyResolved); !strings.Contains(c.Message, agents+"/coding-agents") {
		t.Errorf("PolicyResolved does not name the policy namespace/name: %q", c.Message)
	}

	source := &corev1.ConfigMap{}
	copyKey := types.NamespacedName{Namespace: platform, Name: agents + "-confirmer-bundle"}
	bundle := &corev1.ConfigMap{}
	sameData := func() error {
		if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: agents, Name: "coding-agents-bootstrap"}, source); err != nil {
			return err
		}
		if err := k8sClient.Get(ctx, copyKey, bundle); err != nil {
			return err
		}
		if !maps.Equal(bundle.Data, source.Data) || len(bundle.BinaryData) != len(source.BinaryData) {
			return fmt.Errorf("the copy %s holds keys %v, the policy's ConfigMap %v", copyKey.Name, slices.Sorted(maps.Keys(bundle.Data)), slices.Sorted(maps.Keys(source.Data)))
		}
		return nil
	}
	testutil.Eventually(t, 20*time.Second, sameData)
	ref := metav1.GetControllerOf(bundle)
	if ref == nil || ref.UID != got.UID || ref.Kind != "SessionConfirmer" {
		t.Errorf("the copy is not owned by the SessionConfirmer: %v", ref)
	}
	if bundle.Labels[gatev1.LabelManagedBy] != gatev1.ManagedByValue || bundle.Labels[gatev1.LabelConfirmer] != sc.Name {
		t.Errorf("the copy's labels %v", bundle.Labels)
	}

	d := &appsv1.Deployment{}
	testutil.Eventually(t, 20*time.Second, func() error {
		return k8sClient.Get(ctx, types.NamespacedName{Namespace: platform, Name: agents + "-confirmer"}, d)
	})
	var mounted string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "bootstrap" && v.ConfigMap != nil {
			mounted = v.ConfigMap.Name
		}
	}
	if mounted != copyKey.Name {
		t.Errorf("the Deployment mounts ConfigMap %q, want the copy %s", mounted, copyKey.Name)
	}
	if args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--leader-election-namespace="+platform) {
		t.Errorf("the members Lease is not in the platform namespace: %s", args)
	}

	// A policy edit publishes a new bundle; the copy follows it.
	before := getPolicy(t, p).Status.SnapshotDigest
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := getPolicy(t, p)
		live.Spec.Rules[0].Reason = "no deleting the root filesystem"
		return k8sClient.Update(ctx, live)
	}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if d := getPolicy(t, p).Status.SnapshotDigest; d == before || d == "" {
			return fmt.Errorf("the policy still publishes %s", d)
		}
		return sameData()
	})

	// A hand edit of the copy is undone.
	bundle.Data = map[string]string{"policy-snapshot.rules": "forged"}
	if err := k8sClient.Update(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, sameData)
}

// TestCrossNamespaceConfirmerRefusedOutsidePlatform: a SessionConfirmer outside the platform
// namespaces naming a policy in another namespace renders nothing, and says why.
func TestCrossNamespaceConfirmerRefusedOutsidePlatform(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	agents := confirmerNamespace(ctx, t)
	team := testutil.CreateNamespace(ctx, t, k8sClient, "team-")
	sc := crossNamespaceConfirmer(t, team, agents)
	if err := k8sClient.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	got := waitConfirmer(t, sc, gatev1.ConditionPolicyResolved, metav1.ConditionFalse, gatev1.ReasonPolicyNamespaceForbidden)
	c := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionPolicyResolved)
	if !strings.Contains(c.Message, "spec.policyRef.namespace") || !strings.Contains(c.Message, team) {
		t.Errorf("the condition does not say what is refused: %q", c.Message)
	}
	if r := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionReady); r == nil || r.Status != metav1.ConditionFalse {
		t.Errorf("Ready %+v", r)
	}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.ServiceAccount{}, &corev1.ConfigMap{}} {
		name := agents + "-confirmer"
		if _, ok := obj.(*corev1.ConfigMap); ok {
			name = agents + "-confirmer-bundle"
		}
		if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: team, Name: name}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s rendered for a refused SessionConfirmer: %v", obj, name, err)
		}
	}
}

// TestCopiesOnlyThePublishedBundle: the copy is made only of a bootstrap ConfigMap that is,
// unedited, what the policy's status records as published: a hand edit in the agents'
// namespace does not reach the platform confirmer (the policy controller puts the source back).
func TestCopiesOnlyThePublishedBundle(t *testing.T) {
	p := newPolicy("agents", "coding-agents")
	p.UID = "4f1c-policy"
	res, err := bootstrap.Build(p, bootstrap.Published{}, bootstrap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.BootstrapHash = res.Bundle.Hash
	published := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "coding-agents-bootstrap", Labels: childLabels(p),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: gatev1.GroupVersion.String(), Kind: "HarnessAgentPolicy", Name: p.Name, UID: p.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Data: maps.Clone(res.Bundle.Data),
		}
	}
	for _, tc := range []struct {
		name string
		edit func(cm *corev1.ConfigMap, p *gatev1.HarnessAgentPolicy)
		want bool
	}{
		{"as published", func(*corev1.ConfigMap, *gatev1.HarnessAgentPolicy) {}, true},
		{"snapshot edited", func(cm *corev1.ConfigMap, _ *gatev1.HarnessAgentPolicy) {
			cm.Data[gate.SnapshotFileName] = strings.Replace(cm.Data[gate.SnapshotFileName], "root", "r00t", 1)
		}, false},
		{"a key added", func(cm *corev1.ConfigMap, _ *gatev1.HarnessAgentPolicy) { cm.Data["extra"] = "x" }, false},
		{"hash key rewritten", func(cm *corev1.ConfigMap, _ *gatev1.HarnessAgentPolicy) {
			cm.Data[bootstrap.KeyBootstrapHash] = "sha256:" + strings.Repeat("0", 64)
		}, false},
		{"not the status's bundle", func(_ *corev1.ConfigMap, p *gatev1.HarnessAgentPolicy) {
			p.Status.BootstrapHash = "sha256:" + strings.Repeat("1", 64)
		}, false},
		{"not the policy's child", func(cm *corev1.ConfigMap, _ *gatev1.HarnessAgentPolicy) { cm.OwnerReferences = nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm, pol := published(), p.DeepCopy()
			tc.edit(cm, pol)
			if got := isPublishedBundle(cm, pol, bootstrap.Options{}); got != tc.want {
				t.Errorf("isPublishedBundle = %v, want %v", got, tc.want)
			}
		})
	}
}
