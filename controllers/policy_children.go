package controllers

import (
	"context"
	"encoding/json"
	"errors"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
)

// policyApplied is what the apply phase did: the API server's refusals of the children, and
// whether the ConfigMap already held the bundle (so nothing was sent for it).
type policyApplied struct {
	configMapErr, networkPolicyErr error
	configMapCurrent               bool
}

// err is the reconcile's error: the ConfigMap's refusal first, since egress waits for it.
func (a policyApplied) err() error {
	if a.configMapErr != nil {
		return a.configMapErr
	}
	return a.networkPolicyErr
}

// apply server-side applies the children that differ from what the cache holds, so a steady
// state sends no write at all. Each apply carries the whole desired object, owner reference
// and labels included, with ForceOwnership: a child deleted or edited by hand is restored.
// A refused apply is recorded for the status, and the other child is still applied.
func (r *HarnessAgentPolicyReconciler) apply(ctx context.Context, p *gatev1.HarnessAgentPolicy, o *observedState, want *desiredState) policyApplied {
	var a policyApplied
	if configMapMatches(o.configMap, p, want.build.Bundle, r.Bootstrap) {
		a.configMapCurrent = true
	} else {
		cm := corev1ac.ConfigMap(bootstrap.ConfigMapName(p.Name), p.Namespace).
			WithLabels(childLabels(p)).
			WithAnnotations(map[string]string{gatev1.AnnotationBootstrapHash: want.build.Bundle.Hash}).
			WithOwnerReferences(controllerReference(p, "HarnessAgentPolicy")).
			WithData(want.build.Bundle.Data)
		a.configMapErr = r.Client.Apply(ctx, cm, client.FieldOwner(gatev1.FieldManager), client.ForceOwnership)
	}
	if want.egressKept || networkPolicyMatches(o.networkPolicy, p, want) {
		return a
	}
	if a.configMapErr != nil {
		// Egress never changes ahead of the rules: an update that widens egress may rely on
		// a rule the sandboxes do not have yet.
		a.networkPolicyErr = errEgressHeldForBundle
		return a
	}
	np := networkingv1ac.NetworkPolicy(networkPolicyName(p), p.Namespace).
		WithLabels(childLabels(p)).
		WithOwnerReferences(controllerReference(p, "HarnessAgentPolicy")).
		WithSpec(want.egress.Spec)
	if want.ceilings != "" {
		np.WithAnnotations(map[string]string{gatev1.AnnotationEgressCeilings: want.ceilings})
	}
	ac, err := withEmptyEgress(np)
	if err == nil {
		err = r.Client.Apply(ctx, ac, client.FieldOwner(gatev1.FieldManager), client.ForceOwnership)
	}
	a.networkPolicyErr = err
	return a
}

// errEgressHeldForBundle is why the NetworkPolicy was not applied when the ConfigMap was refused.
var errEgressHeldForBundle = errors.New("not applied, because the bootstrap ConfigMap was refused: egress changes only with the rules it belongs to")

// withEmptyEgress keeps an empty egress list in the applied object. The typed apply
// configuration drops an empty list, and then the manager would not own spec.egress: rules
// added by hand would survive every apply and reopen a deny-all policy.
func withEmptyEgress(np *networkingv1ac.NetworkPolicyApplyConfiguration) (runtime.ApplyConfiguration, error) {
	if len(np.Spec.Egress) > 0 {
		return np, nil
	}
	raw, err := json.Marshal(np)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedSlice(u.Object, []any{}, "spec", "egress"); err != nil {
		return nil, err
	}
	return client.ApplyConfigurationFromUnstructured(u), nil
}

func childLabels(p *gatev1.HarnessAgentPolicy) map[string]string {
	return map[string]string{gatev1.LabelManagedBy: gatev1.ManagedByValue, gatev1.LabelPolicy: p.Name}
}

// ownedBy reports whether obj carries the policy's labels and controller owner reference.
func ownedBy(obj metav1.Object, p *gatev1.HarnessAgentPolicy) bool {
	for k, v := range childLabels(p) {
		if obj.GetLabels()[k] != v {
			return false
		}
	}
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == p.UID && ref.Kind == "HarnessAgentPolicy" && ref.Name == p.Name &&
		ptr.Deref(ref.BlockOwnerDeletion, false)
}

// configMapMatches reports whether cm holds bundle. It compares only what the apply sets: keys
// someone else added to the data are theirs under server-side apply and would differ forever.
// Without the bundle's data (the memo dropped it, see bundleMemo.dropData) the files are
// checked against the bootstrap hash, which covers every one of them.
func configMapMatches(cm *corev1.ConfigMap, p *gatev1.HarnessAgentPolicy, bundle bootstrap.Bundle, opts bootstrap.Options) bool {
	if cm == nil || !ownedBy(cm, p) || cm.Annotations[gatev1.AnnotationBootstrapHash] != bundle.Hash {
		return false
	}
	if bundle.Data == nil {
		return cm.Data[bootstrap.KeyBootstrapHash] == bundle.Hash && bootstrap.Verify(cm.Data, p.Spec.WorkspaceID, opts)
	}
	for k, v := range bundle.Data {
		if got, ok := cm.Data[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func networkPolicyMatches(np *networkingv1.NetworkPolicy, p *gatev1.HarnessAgentPolicy, want *desiredState) bool {
	if np == nil || !ownedBy(np, p) || np.Annotations[gatev1.AnnotationEgressCeilings] != want.ceilings {
		return false
	}
	return egressSpecMatches(&np.Spec, want.egress.Spec)
}

// egressSpecMatches reports whether an egress NetworkPolicy's spec is the rendered one. Ingress
// is not compared: it is not ours to manage, and an ingress rule cannot widen egress.
func egressSpecMatches(got *networkingv1.NetworkPolicySpec, want *networkingv1ac.NetworkPolicySpecApplyConfiguration) bool {
	raw, err := json.Marshal(want)
	if err != nil {
		return false
	}
	var spec networkingv1.NetworkPolicySpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return false
	}
	return equality.Semantic.DeepEqual(got.PodSelector, spec.PodSelector) &&
		equality.Semantic.DeepEqual(got.PolicyTypes, spec.PolicyTypes) &&
		equality.Semantic.DeepEqual(normalizeEgress(got.Egress), normalizeEgress(spec.Egress))
}

// normalizeEgress treats nil and empty egress lists alike.
func normalizeEgress(e []networkingv1.NetworkPolicyEgressRule) []networkingv1.NetworkPolicyEgressRule {
	if len(e) == 0 {
		return nil
	}
	return e
}
