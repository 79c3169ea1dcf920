package bootstrap

import (
	"errors"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/gate"
)

// Published is what the controller knows of the bundle in force for a policy: the data of its
// bootstrap ConfigMap (nil when there is none, or when the ConfigMap is not the policy's own)
// and the snapshot digest and bootstrap hash the policy's status recorded when the controller
// published it.
type Published struct {
	Data           map[string]string
	SnapshotDigest string
	BootstrapHash  string
}

// Result is the bundle to publish for a policy, and why.
type Result struct {
	// Bundle is the ConfigMap data to publish, always set.
	Bundle Bundle
	// Snapshot is the snapshot Bundle carries.
	Snapshot *gate.Snapshot
	// CompileErrs are the rules' problems; empty when they compiled.
	CompileErrs gate.FieldErrors
	// RenderErr is set when the rules compiled but their bundle would not fit in a ConfigMap
	// (a *TooLargeError).
	RenderErr error
	// Kept is set when Bundle is the one in force, re-rendered (see Build).
	Kept bool
	// ClusterPolicies are the cluster policies whose layers Bundle carries, in report order.
	ClusterPolicies []string
}

// HeldBack reports whether the spec's rules could not be published.
func (r *Result) HeldBack() bool { return len(r.CompileErrs) > 0 || r.RenderErr != nil }

// Build is the one recipe of a policy's bootstrap bundle: it compiles the rules into a
// snapshot (once) and renders the bundle. When the rules cannot be published (they do not
// compile, or their bundle would not fit in a ConfigMap), nothing the spec asks for reaches the
// sandboxes: the bundle in force stays, re-rendered around its snapshot, if it is one the
// controller published for this policy (see lastGood); otherwise the bundle blocks every call
// with the most restrictive harness settings. The error is for what no policy can cause.
func Build(p *gatev1.HarnessAgentPolicy, published Published, opts Options) (Result, error) {
	return BuildLayered(p, Layers{}, published, opts)
}

// BuildLayered is Build for a namespace whose bundles carry cluster layers (ClusterLayerOf,
// in any order; built for the policy's workspace) or exceptions. The layers are always the ones given: when
// the policy's own rules cannot be published and the bundle in force is kept, it is kept
// around the current layers. When the layers do not fit beside the policy's snapshot, the
// bundle blocks every call (RenderErr says why): a namespace never runs without its baseline.
func BuildLayered(p *gatev1.HarnessAgentPolicy, layers Layers, published Published, opts Options) (Result, error) {
	meta, rules := SnapshotSource(p)
	var res Result
	snap, checked, err := gate.BuildSnapshotChecked(meta, rules)
	switch {
	case errors.As(err, &res.CompileErrs):
	case err != nil:
		return Result{}, err
	default:
		data, err := snap.Encode()
		if err != nil {
			return Result{}, err
		}
		b, err := RenderLayered(&p.Spec, data, checked, layers, p.Namespace, opts)
		var tooLarge *TooLargeError
		switch {
		case errors.As(err, &tooLarge):
			res.RenderErr = err
		case err != nil:
			return Result{}, err
		default:
			res.Bundle, res.Snapshot, res.ClusterPolicies = b, snap, layerNames(layers.Cluster)
			return res, nil
		}
	}
	if last := lastGood(p, published, opts); last != nil {
		b, err := Keep(published.Data, p.Spec.WorkspaceID, layers, p.Namespace, opts)
		var tooLarge *TooLargeError
		switch {
		case errors.As(err, &tooLarge):
			res.RenderErr = err // the kept snapshot does not fit beside the layers either
		case err != nil:
			return Result{}, err
		default:
			res.Bundle, res.Snapshot, res.Kept, res.ClusterPolicies = b, last, true, layerNames(layers.Cluster)
			return res, nil
		}
	}
	var reason error = res.CompileErrs
	if res.RenderErr != nil {
		reason = res.RenderErr
	}
	invalid, err := gate.BuildInvalidSnapshot(meta, reason.Error())
	if err != nil {
		return Result{}, err
	}
	data, err := invalid.Encode()
	if err != nil {
		return Result{}, err
	}
	if res.Bundle, err = RenderBlocking(p.Spec.WorkspaceID, data, opts); err != nil {
		return Result{}, err
	}
	res.Snapshot = invalid
	return res, nil
}

// lastGood returns the snapshot in force when its bundle is, unedited, the one the controller
// published for this policy: its files match its bootstrap hash, that hash and the snapshot's
// digest are the ones the status recorded, and the snapshot is sealed for this policy and
// workspace at a generation the policy has had. Anything else (edited by hand, resealed,
// another policy's or workspace's) is not kept.
func lastGood(p *gatev1.HarnessAgentPolicy, pub Published, opts Options) *gate.Snapshot {
	if pub.Data == nil || pub.SnapshotDigest == "" || pub.BootstrapHash == "" ||
		pub.Data[KeyBootstrapHash] != pub.BootstrapHash || !Verify(pub.Data, p.Spec.WorkspaceID, opts) {
		return nil
	}
	s, err := gate.LoadSnapshot([]byte(pub.Data[KeySnapshot]), "")
	if err != nil || s.Invalid != "" || s.Digest != pub.SnapshotDigest || s.Policy != p.Namespace+"/"+p.Name ||
		s.WorkspaceID != p.Spec.WorkspaceID || s.Generation > p.Generation {
		return nil
	}
	return s
}
