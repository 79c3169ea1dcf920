package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
)

// +kubebuilder:rbac:groups=gate.intutic.io,resources=clusterharnessagentpolicies,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch
// +kubebuilder:rbac:groups=gate.intutic.io,resources=gateexceptions,verbs=list;watch

// selectingClusterPolicies are the cluster policies, not being deleted, whose namespaceSelector
// selects the namespace, and that namespace's labels; none when the reconciler reads no cluster
// policies. The list is also what the memos of layers and ceiling hosts keep. A cluster policy
// whose namespace selector cannot be evaluated selects no namespace: the validating webhook
// refuses one, and its own status says so.
func (r *HarnessAgentPolicyReconciler) selectingClusterPolicies(ctx context.Context, namespace string) ([]*gatev1.ClusterHarnessAgentPolicy, map[string]string, error) {
	if !r.ClusterPolicies {
		return nil, nil, nil
	}
	var list gatev1.ClusterHarnessAgentPolicyList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing ClusterHarnessAgentPolicies: %w", err)
	}
	r.layers.keepOnly(list.Items)
	if dropped := r.ceilingHosts.keepOnly(list.Items); dropped > 0 {
		r.mu.Lock()
		r.addAddresses(-dropped)
		r.mu.Unlock()
	}
	if len(list.Items) == 0 {
		return nil, nil, nil
	}
	nsLabels, err := namespaceLabels(ctx, r.Client, namespace)
	if err != nil {
		return nil, nil, err
	}
	var out []*gatev1.ClusterHarnessAgentPolicy
	for i := range list.Items {
		if c := &list.Items[i]; c.DeletionTimestamp.IsZero() && selectsNamespace(c, nsLabels) {
			out = append(out, c)
		}
	}
	return out, nsLabels, nil
}

// bundleLayers returns what the policy's bundle carries beside its own snapshot: the layers of
// the selecting cluster policies, built for its workspace, in report order, and the active
// exceptions of its namespace (bootstrap.JudgeException, as the exceptions' status says) for
// each of those layers and for the policy itself; and when the first of those exceptions
// expires, so the reconcile drops it then (the gate already stops honouring it at that time).
func (r *HarnessAgentPolicyReconciler) bundleLayers(ctx context.Context, p *gatev1.HarnessAgentPolicy, selecting []*gatev1.ClusterHarnessAgentPolicy, nsLabels map[string]string) (bootstrap.Layers, time.Time, error) {
	var out bootstrap.Layers
	var exceptions gatev1.GateExceptionList
	if err := r.Client.List(ctx, &exceptions, client.InNamespace(p.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return out, time.Time{}, fmt.Errorf("listing GateExceptions: %w", err)
	}
	j := &exceptionJudge{now: r.Clock.Now(), items: exceptions.Items}
	var err error
	if out.Exceptions, err = j.active(gatev1.ExceptionOfNamespacePolicy, p.Name, bootstrap.ExceptionTarget{Namespace: p}); err != nil {
		return out, time.Time{}, err
	}
	for _, c := range selecting {
		l, err := r.layers.layer(c, p.Spec.WorkspaceID)
		if err != nil {
			return out, time.Time{}, fmt.Errorf("building the layer of ClusterHarnessAgentPolicy %s: %w", c.Name, err)
		}
		// The memoised layer is shared by every namespace; its exceptions are this one's.
		if l.Exceptions, err = j.active(gatev1.ExceptionOfClusterPolicy, c.Name, bootstrap.ExceptionTarget{Cluster: c, NamespaceLabels: nsLabels}); err != nil {
			return out, time.Time{}, err
		}
		out.Cluster = append(out.Cluster, l)
	}
	bootstrap.SortClusterLayers(out.Cluster) // a deterministic order for the bundle memo's fingerprint
	return out, j.next, nil
}

// exceptionJudge picks a namespace's active exceptions of each policy, and keeps when the first
// of those it picked expires.
type exceptionJudge struct {
	now, next time.Time
	items     []gatev1.GateException
}

// active are the active exceptions of the policy of this kind and name, for its layer.
func (j *exceptionJudge) active(kind gatev1.ExceptionPolicyKind, name string, target bootstrap.ExceptionTarget) ([]gate.Exception, error) {
	out, next, err := bootstrap.ActiveExceptions(j.items, kind, name, target, j.now)
	if !next.IsZero() && (j.next.IsZero() || next.Before(j.next)) {
		j.next = next
	}
	return out, err
}

// selectsNamespace reports whether the cluster policy's namespaceSelector selects a namespace
// with these labels.
func selectsNamespace(c *gatev1.ClusterHarnessAgentPolicy, nsLabels map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector)
	return err == nil && sel.Matches(labels.Set(nsLabels))
}

// namespaceLabels reads a namespace's labels from the metadata-only cache.
func namespaceLabels(ctx context.Context, c client.Reader, name string) (map[string]string, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := c.Get(ctx, types.NamespacedName{Name: name}, ns, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	return ns.Labels, nil
}

// layersFingerprint identifies what a bundle carries beside its snapshot, for the bundle memo:
// what a bundle built with it depends on.
func layersFingerprint(layers bootstrap.Layers) string {
	if len(layers.Cluster) == 0 && len(layers.Exceptions) == 0 {
		return ""
	}
	h := sha256.New()
	for _, l := range layers.Cluster {
		sel, _ := json.Marshal(l.PodSelector) // plain structs always marshal
		exc, _ := json.Marshal(l.Exceptions)
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00%s\x00%s\x00%t\x00%x\x00%s\x00", l.Name, l.Priority, l.Digest, sel, l.PermissionMode, l.FilterBash, sha256.Sum256(l.Checked), exc)
	}
	exc, _ := json.Marshal(layers.Exceptions)
	fmt.Fprintf(h, "exceptions\x00%s", exc)
	return hex.EncodeToString(h.Sum(nil))
}

// layerMemo holds each cluster policy's layer per workspace, so a cluster policy over a
// thousand namespaces compiles once per generation, not once per namespace policy.
type layerMemo struct {
	mu    sync.Mutex
	built map[layerKey]builtLayer
}

type layerKey struct{ name, workspace string }

type builtLayer struct {
	uid        types.UID
	generation int64
	layer      bootstrap.ClusterLayer
}

// layer returns the cluster policy's layer for a workspace, building it when the memo holds
// none for this generation. Rules that do not compile still make a layer (one that blocks).
func (m *layerMemo) layer(c *gatev1.ClusterHarnessAgentPolicy, workspace string) (bootstrap.ClusterLayer, error) {
	key := layerKey{c.Name, workspace}
	m.mu.Lock()
	b, ok := m.built[key]
	m.mu.Unlock()
	if ok && b.uid == c.UID && b.generation == c.Generation {
		return b.layer, nil
	}
	l, _, err := bootstrap.ClusterLayerOf(c, workspace)
	if err != nil {
		return bootstrap.ClusterLayer{}, err
	}
	clusterLayerBuilds.Inc()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.built == nil {
		m.built = map[layerKey]builtLayer{}
	}
	m.built[key] = builtLayer{uid: c.UID, generation: c.Generation, layer: l}
	return l, nil
}

// keepOnly drops the layers of cluster policies that are gone (not in the list, or another
// object of the same name).
func (m *layerMemo) keepOnly(current []gatev1.ClusterHarnessAgentPolicy) {
	uids := make(map[string]types.UID, len(current))
	for i := range current {
		uids[current[i].Name] = current[i].UID
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, b := range m.built {
		if uids[k.name] != b.uid {
			delete(m.built, k)
		}
	}
}

// allPolicies enqueues every namespace policy: a cluster policy's event may change the layers
// of any namespace, the ones it stops selecting included. Their bundles are memoised, so the
// ones it does not change cost a lookup and no write.
func (r *HarnessAgentPolicyReconciler) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	var list gatev1.HarnessAgentPolicyList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing policies for a ClusterHarnessAgentPolicy's change")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}})
	}
	return reqs
}

// policiesOfNamespace enqueues the policies of a namespace whose labels changed: the cluster
// policies selecting it may have changed.
func (r *HarnessAgentPolicyReconciler) policiesOfNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	return r.policiesInNamespace(ctx, ns.GetName(), func(*gatev1.HarnessAgentPolicy) bool { return true })
}

// policiesOfExceptionNamespace enqueues the policies of an exception's namespace: it may lift
// rules of any layer their bundles carry.
func (r *HarnessAgentPolicyReconciler) policiesOfExceptionNamespace(ctx context.Context, gex client.Object) []reconcile.Request {
	return r.policiesInNamespace(ctx, gex.GetNamespace(), func(*gatev1.HarnessAgentPolicy) bool { return true })
}
