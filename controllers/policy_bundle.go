package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
)

// buildBundle is bootstrap.BuildLayered, memoised: the rules compile once per generation of the
// policy (and, while they cannot be published, once per state of the bundle in force), not on
// every reconcile that pods or other NetworkPolicies cause.
func (r *HarnessAgentPolicyReconciler) buildBundle(p *gatev1.HarnessAgentPolicy, o *observedState) (bootstrap.Result, error) {
	published := bootstrap.Published{SnapshotDigest: p.Status.SnapshotDigest, BootstrapHash: p.Status.BootstrapHash}
	publishedVersion := ""
	if cm := o.configMap; cm != nil && ownedBy(cm, p) {
		published.Data, publishedVersion = cm.Data, cm.ResourceVersion
	}
	name := client.ObjectKeyFromObject(p)
	key := buildKey{uid: p.UID, generation: p.Generation, layers: layersFingerprint(o.layers), digest: published.SnapshotDigest, hash: published.BootstrapHash, configMapVersion: publishedVersion}
	// A result whose data was dropped is good only while the ConfigMap still holds it.
	if res, ok := r.bundles.lookup(name, key); ok && (res.Bundle.Data != nil || configMapMatches(o.configMap, p, res.Bundle, r.Bootstrap)) {
		return res, nil
	}
	res, err := bootstrap.BuildLayered(p, o.layers, published, r.Bootstrap)
	if err != nil {
		return bootstrap.Result{}, err
	}
	snapshotBuilds.Inc()
	r.bundles.store(name, key, res)
	return res, nil
}

// bundleMemo holds each policy's last bootstrap.Build result between reconciles. Its lock is
// its own: a reconcile never holds it across an API call or a lookup.
type bundleMemo struct {
	mu    sync.Mutex
	built map[types.NamespacedName]builtBundle
}

// buildKey is what a memoised bootstrap.Result depends on.
type buildKey struct {
	uid        types.UID
	generation int64
	// layers fingerprints the cluster layers the bundle carries (layersFingerprint).
	layers                         string
	digest, hash, configMapVersion string
}

type builtBundle struct {
	key    buildKey
	result bootstrap.Result
}

// builtFor reports whether b still holds for key: a result that publishes the spec depends on
// the spec alone, one held back depends on the bundle in force too.
func (b builtBundle) builtFor(key buildKey) bool {
	if b.result.HeldBack() {
		return b.key == key
	}
	return b.key.uid == key.uid && b.key.generation == key.generation && b.key.layers == key.layers
}

// lookup returns the policy's memoised result when it was built for key. Its Bundle.Data is
// nil when dropData dropped it.
func (m *bundleMemo) lookup(name types.NamespacedName, key buildKey) (bootstrap.Result, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.built[name]
	if !ok || !b.builtFor(key) {
		return bootstrap.Result{}, false
	}
	return b.result, true
}

// store memoises the result built for key.
func (m *bundleMemo) store(name types.NamespacedName, key buildKey, res bootstrap.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.built == nil {
		m.built = map[types.NamespacedName]builtBundle{}
	}
	m.built[name] = builtBundle{key: key, result: res}
}

// dropData forgets the data of the memoised bundle published as res, once the policy's
// ConfigMap holds it: the cache has it already, and keeping a second copy of every bundle
// doubles the manager's memory. The bootstrap hash stays to compare with; a ConfigMap that
// stops matching builds it again. A held-back result keeps its data.
func (m *bundleMemo) dropData(name types.NamespacedName, res bootstrap.Result) {
	if res.Bundle.Data == nil || res.HeldBack() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.built[name]; ok && b.result.Bundle.Hash == res.Bundle.Hash && !b.result.HeldBack() {
		b.result.Bundle.Data = nil
		m.built[name] = b
	}
}

// forget drops what is memoised for a policy that is gone.
func (m *bundleMemo) forget(name types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.built, name)
}
