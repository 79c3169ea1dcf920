package bootstrap

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/gate"
)

// Layers is what a namespace policy's bundle carries beside its own snapshot: the layers of
// the cluster policies selecting its namespace, and the active exceptions of its namespace that
// lift its own rules (ExceptionOf). Each cluster layer carries the exceptions of its own rules.
type Layers struct {
	Cluster    []ClusterLayer
	Exceptions []gate.Exception
}

// layered reports whether the bundle carries a layers index.
func (l Layers) layered() bool { return len(l.Cluster) > 0 || len(l.Exceptions) > 0 }

// ClusterLayer is a ClusterHarnessAgentPolicy as the bundles of one workspace carry it: its
// snapshot, the pod selector the hook resolves against its pod's labels, and its posture floor.
// ClusterLayerOf builds it; the bundles of every namespace the policy selects carry the same
// bytes, so its digest names one version of the baseline cluster-wide.
type ClusterLayer struct {
	Name     string
	Priority int32
	// PodSelector is the policy's spec.podSelector as the layers index carries it.
	PodSelector []gate.Requirement
	// Snapshot is the encoded snapshot, Checked its checked rules file (optional).
	Snapshot, Checked []byte
	// Digest is the snapshot's.
	Digest string
	// PermissionMode and FilterBash are the posture floor (see applyFloor).
	PermissionMode gatev1.PermissionMode
	FilterBash     bool
	// Exceptions are the active exceptions of the bundle's namespace that lift this layer's
	// rules; the layer as ClusterLayerOf builds it has none.
	Exceptions []gate.Exception
}

// ClusterSnapshotSource is what a cluster policy's snapshot for one workspace is built from.
// Its policy is the bare name: the layer's caller.namespace is the bundle's (gate.LayersIndex).
func ClusterSnapshotSource(c *gatev1.ClusterHarnessAgentPolicy, workspaceID string) (gate.PolicyMeta, []gate.Rule) {
	meta := gate.PolicyMeta{
		Policy:        c.Name,
		Generation:    c.Generation,
		WorkspaceID:   workspaceID,
		DefaultAction: gate.Verdict(c.Spec.DefaultAction),
		FailurePolicy: gate.FailurePolicy(c.Spec.FailurePolicy),
		Enforcement:   gate.Enforcement(c.Spec.Enforcement),
		RecordInput:   inputRecording(c.Spec.DecisionRecords),
	}
	return meta, gateRules(c.Spec.Rules)
}

// ClusterLayerOf builds the layer of a cluster policy for the bundles of one workspace. Rules
// that do not compile are returned as CompileErrs and the layer then carries a snapshot that
// blocks every call of the pods it selects (policy_invalid): a baseline is never dropped
// because it is broken. The error is for a pod selector that cannot be evaluated and for what no
// policy can cause; then there is no layer, and the caller must not publish without it.
func ClusterLayerOf(c *gatev1.ClusterHarnessAgentPolicy, workspaceID string) (layer ClusterLayer, compileErrs gate.FieldErrors, err error) {
	reqs, err := Requirements(&c.Spec.PodSelector)
	if err != nil {
		return ClusterLayer{}, nil, fmt.Errorf("spec.podSelector: %w", err)
	}
	meta, rules := ClusterSnapshotSource(c, workspaceID)
	snap, checked, err := gate.BuildSnapshotChecked(meta, rules)
	if errors.As(err, &compileErrs) {
		checked = nil
		if snap, err = gate.BuildInvalidSnapshot(meta, compileErrs.Error()); err != nil {
			return ClusterLayer{}, nil, err
		}
	} else if err != nil {
		return ClusterLayer{}, nil, err
	}
	data, err := snap.Encode()
	if err != nil {
		return ClusterLayer{}, nil, err
	}
	layer = ClusterLayer{
		Name: c.Name, Priority: c.Spec.Priority, PodSelector: reqs,
		Snapshot: data, Checked: checked, Digest: snap.Digest,
		PermissionMode: c.Spec.PermissionMode, FilterBash: c.Spec.FilterBash != nil && *c.Spec.FilterBash,
	}
	return layer, compileErrs, nil
}

// Requirements turns a label selector into the layers index's requirements: each matchLabels
// entry becomes In with its one value. A selector apimachinery would refuse is refused here
// with its message, naming the field.
func Requirements(s *metav1.LabelSelector) ([]gate.Requirement, error) {
	if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
		return nil, err
	}
	reqs := make([]gate.Requirement, 0, len(s.MatchLabels)+len(s.MatchExpressions))
	for k, v := range s.MatchLabels {
		reqs = append(reqs, gate.Requirement{Key: k, Operator: string(metav1.LabelSelectorOpIn), Values: []string{v}})
	}
	for _, e := range s.MatchExpressions {
		reqs = append(reqs, gate.Requirement{Key: e.Key, Operator: string(e.Operator), Values: slices.Clone(e.Values)})
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	return reqs, nil
}

// gateRules maps API rules onto the gate's.
func gateRules(in []gatev1.Rule) []gate.Rule {
	rules := make([]gate.Rule, 0, len(in))
	for _, r := range in {
		rules = append(rules, gate.Rule{Name: r.Name, Tools: slices.Clone(r.Tools), When: r.When, Action: gate.Verdict(r.Action), Reason: r.Reason, Code: r.Code,
			Enforcement: gate.Enforcement(r.Enforcement)})
	}
	return rules
}

// applyFloor is spec with the cluster layers' posture floor: allow-reads when any layer asks for
// it, bash filtered when any layer filters it. It only ever tightens, and it applies to every pod
// of the bundle whatever the layers' pod selectors, which the bundle cannot resolve: a floor a
// layer sets for some pods of a namespace policy holds for all of them.
func applyFloor(spec *gatev1.HarnessAgentPolicySpec, layers []ClusterLayer) *gatev1.HarnessAgentPolicySpec {
	out := spec.DeepCopy()
	for _, l := range layers {
		if l.PermissionMode == gatev1.PermissionModeAllowReads {
			out.PermissionMode = gatev1.PermissionModeAllowReads
		}
		if l.FilterBash {
			t := true
			out.FilterBash = &t
		}
	}
	return out
}

// addLayers adds the layers index and each layer's files to a bundle's data: a namespace
// policy's (namespaced, its own snapshot decided last) or a namespace's baseline (not
// namespaced: the layers alone decide). The checked rules files are optional: render drops them
// when the bundle is too large.
func addLayers(data map[string]string, layers Layers, namespace, workspaceID string, namespaced bool) error {
	idx := gate.LayersIndex{Namespace: namespace, WorkspaceID: workspaceID, Namespaced: namespaced, Exceptions: layers.Exceptions}
	for _, l := range layers.Cluster {
		idx.Layers = append(idx.Layers, gate.Layer{
			Kind: gate.LayerKindCluster, Name: l.Name, Priority: l.Priority, PodSelector: l.PodSelector,
			File: gate.ClusterLayerFile(l.Name), Digest: l.Digest, Exceptions: l.Exceptions,
		})
		data[gate.ClusterLayerFile(l.Name)] = string(l.Snapshot)
		if len(l.Checked) > 0 {
			data[gate.ClusterLayerCheckedFile(l.Name)] = string(l.Checked)
		}
	}
	index, err := gate.BuildLayersIndex(idx)
	if err != nil {
		return fmt.Errorf("the layers index: %w", err)
	}
	data[gate.LayersFileName] = string(index)
	return nil
}

// layerFiles are the keys of a layered bundle's layers: the index, then each layer's snapshot
// and (when present) checked rules file, in the index's order. A key the index does not name
// is not the bundle's, whatever it is called; an index that does not load names nothing, and
// the hook refuses it.
func layerFiles(data map[string]string) []string {
	raw, ok := data[gate.LayersFileName]
	if !ok {
		return nil
	}
	keys := []string{gate.LayersFileName}
	idx, err := gate.LoadLayersIndex([]byte(raw), "")
	if err != nil {
		return keys
	}
	for _, l := range idx.Layers {
		keys = append(keys, l.File)
		if _, ok := data[gate.ClusterLayerCheckedFile(l.Name)]; ok {
			keys = append(keys, gate.ClusterLayerCheckedFile(l.Name))
		}
	}
	return keys
}

// SortClusterLayers sorts layers into report order (priority, then name), the order the
// layers index has them in.
func SortClusterLayers(layers []ClusterLayer) {
	slices.SortFunc(layers, func(a, b ClusterLayer) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Name, b.Name))
	})
}

// layerNames are the layers' names in report order (priority, then name), as the index has them.
func layerNames(layers []ClusterLayer) []string {
	if len(layers) == 0 {
		return nil
	}
	sorted := slices.Clone(layers)
	SortClusterLayers(sorted)
	names := make([]string, 0, len(sorted))
	for _, l := range sorted {
		names = append(names, l.Name)
	}
	return names
}
