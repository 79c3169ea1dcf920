package controllers

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
)

// The platform layout: a SessionConfirmer in a platform namespace answers for a policy of an
// agents' namespace (spec.policyRef.namespace), so that its key, its members Lease and its
// ToolApprovals stay where the agents' editors cannot reach them. A pod mounts ConfigMaps of
// its own namespace only, so the policy's bootstrap ConfigMap is copied, verbatim, into the
// SessionConfirmer's namespace and the Deployment mounts the copy.

// policyRefIndex indexes SessionConfirmers by the policy they name, as namespace/name.
const policyRefIndex = "gate.intutic.io/policy-ref"

func policyRefIndexValue(obj client.Object) []string {
	sc, ok := obj.(*gatev1.SessionConfirmer)
	if !ok {
		return nil
	}
	return []string{sc.PolicyNamespace() + "/" + sc.Spec.PolicyRef.Name}
}

// bundleCopyName names the copy of the policy's bootstrap ConfigMap a cross-namespace
// SessionConfirmer mounts. A SessionConfirmer that names a policy of its own namespace again
// leaves its copy unused until it is deleted with it (the manager holds no delete on
// ConfigMaps).
func bundleCopyName(sc *gatev1.SessionConfirmer) string { return sc.Name + "-confirmer-bundle" }

// bootstrapConfigMapName is the policy's bootstrap ConfigMap, as its status names it.
func bootstrapConfigMapName(p *gatev1.HarnessAgentPolicy) string {
	if p.Status.BootstrapConfigMap != "" {
		return p.Status.BootstrapConfigMap
	}
	return bootstrap.ConfigMapName(p.Name)
}

// policyNamespaceRefusal says why the SessionConfirmer may not name its policy's namespace, or
// "": another namespace only from a platform namespace, and only one the manager serves (its
// cache holds no other).
func (r *SessionConfirmerReconciler) policyNamespaceRefusal(sc *gatev1.SessionConfirmer) string {
	if why := sc.ForbiddenPolicyNamespace(r.PlatformNamespaces); why != "" {
		return why
	}
	if ns := sc.PolicyNamespace(); sc.CrossNamespace() && len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, ns) {
		return fmt.Sprintf("spec.policyRef.namespace: namespace %s is not served by the manager (--namespaces, the chart's watchNamespaces: %s); add it there",
			ns, strings.Join(r.Namespaces, ", "))
	}
	return ""
}

// isPublishedBundle reports whether cm is, unedited, the bundle the policy's status records as
// published: the policy's own child, its hash the status's, its files hashing to it, and no
// other key. Only such a ConfigMap is copied into another namespace, so a hand edit in the
// agents' namespace (which the policy controller puts back) never reaches a platform
// confirmer; the copy in force stays meanwhile.
func isPublishedBundle(cm *corev1.ConfigMap, p *gatev1.HarnessAgentPolicy, opts bootstrap.Options) bool {
	return ownedBy(cm, p) && p.Status.BootstrapHash != "" && cm.Data[bootstrap.KeyBootstrapHash] == p.Status.BootstrapHash &&
		len(cm.BinaryData) == 0 && bootstrap.OnlyBundleKeys(cm.Data) && bootstrap.Verify(cm.Data, p.Spec.WorkspaceID, opts)
}

// gatherBundle reads the policy's bootstrap ConfigMap for a cross-namespace SessionConfirmer:
// nil when it does not exist or is not the bundle the policy published (isPublishedBundle).
func (r *SessionConfirmerReconciler) gatherBundle(ctx context.Context, p *gatev1.HarnessAgentPolicy) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	key := types.NamespacedName{Namespace: p.Namespace, Name: bootstrapConfigMapName(p)}
	if found, err := getOptional(ctx, r.Client, key, cm); err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s: %w", key, err)
	} else if !found || !isPublishedBundle(cm, p, r.Bootstrap) {
		return nil, nil
	}
	return cm, nil
}

// applyBundleCopy keeps the copy equal to the source: the same data and binary data, key for
// key. Its data is patched whole rather than applied, so a key someone else added goes too
// (an apply leaves the fields of other managers).
func (r *SessionConfirmerReconciler) applyBundleCopy(ctx context.Context, sc *gatev1.SessionConfirmer, src *corev1.ConfigMap) error {
	want := corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: sc.Namespace, Name: bundleCopyName(sc), Labels: confirmerLabels(sc),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: gatev1.GroupVersion.String(), Kind: "SessionConfirmer", Name: sc.Name, UID: sc.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}}},
		Data:       src.Data,
		BinaryData: src.BinaryData,
	}
	live := &corev1.ConfigMap{}
	found, err := getOptional(ctx, r.Client, client.ObjectKeyFromObject(&want), live)
	switch {
	case err != nil:
		return err
	case !found:
		return r.Client.Create(ctx, &want)
	case sameCopy(live, &want):
		return nil
	}
	patch := client.MergeFromWithOptions(live.DeepCopy(), client.MergeFromWithOptimisticLock{})
	maps.Copy(live.Labels, want.Labels)
	if live.Labels == nil {
		live.Labels = want.Labels
	}
	live.OwnerReferences = want.OwnerReferences
	live.Data, live.BinaryData = want.Data, want.BinaryData
	return r.Client.Patch(ctx, live, patch)
}

func sameCopy(live, want *corev1.ConfigMap) bool {
	return maps.Equal(live.Data, want.Data) &&
		maps.EqualFunc(live.BinaryData, want.BinaryData, bytes.Equal) &&
		labelsCarry(live.Labels, want.Labels) &&
		equality.Semantic.DeepEqual(live.OwnerReferences, want.OwnerReferences)
}

// confirmersOfPolicy enqueues the SessionConfirmers that name a policy, in its namespace or
// from a platform namespace.
func (r *SessionConfirmerReconciler) confirmersOfPolicy(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.confirmersNaming(ctx, obj.GetNamespace(), obj.GetName())
}

func (r *SessionConfirmerReconciler) confirmersNaming(ctx context.Context, namespace, policy string) []reconcile.Request {
	var list gatev1.SessionConfirmerList
	if err := r.Client.List(ctx, &list, client.MatchingFields{policyRefIndex: namespace + "/" + policy}); err != nil {
		log.FromContext(ctx).Error(err, "listing SessionConfirmers of a policy", "policy", namespace+"/"+policy)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, sc := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sc.Namespace, Name: sc.Name}})
	}
	return reqs
}

// confirmersOfConfigMap enqueues, for a ConfigMap of the manager's, the SessionConfirmer whose
// bundle copy it is, or the SessionConfirmers naming the policy whose bootstrap ConfigMap it
// is: a copy follows its source, and a copy edited by hand is put back.
func (r *SessionConfirmerReconciler) confirmersOfConfigMap(ctx context.Context, obj client.Object) []reconcile.Request {
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != gatev1.GroupVersion.Group {
		return nil
	}
	switch ref.Kind {
	case "SessionConfirmer":
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}}
	case "HarnessAgentPolicy":
		return r.confirmersNaming(ctx, obj.GetNamespace(), ref.Name)
	}
	return nil
}

// labelsCarry reports whether have holds every label of want.
func labelsCarry(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
