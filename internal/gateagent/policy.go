package gateagent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/gate"
)

// kubeletData is the symlink through which the kubelet's atomic writer publishes a volume: it
// names the timestamped directory the volume's files are in, and is swapped to a new one,
// atomically, when the content changes. Its target is the volume's version.
const kubeletData = "..data"

// NoVersion is the version of a bundle directory that is not a kubelet volume (no ..data): its
// files can change with nothing to tell, so nothing loaded from it is kept, and gate-client,
// which never sends it, does not use an answer made with it.
const NoVersion = agentproto.NoVersion

// Bounds of what is kept per version of the volume.
const (
	// maxPolicies bounds the ways of loading one version that are kept (and reloaded eagerly
	// when the version changes): a pod's wrapper always asks one way (its --layers and
	// --workspace).
	maxPolicies = 8
	// maxLoadAttempts bounds the loads of one request or refresh while the volume keeps
	// changing under it.
	maxLoadAttempts = 3
)

// policyKey is how a request asks for the bundle to be loaded, as gate-hook's flags do: with
// its layers (--layers) or its snapshot alone, for a workspace (--workspace) or any.
type policyKey struct {
	layered   bool
	workspace string
}

// loadedPolicy is one version of the bundle loaded one way: what decides, or the refusal that
// stands for it when the bundle does not load (every call is refused with its code, as
// gate-hook refuses it).
type loadedPolicy struct {
	decider decider
	failure *gate.SnapshotError
	// caller is the pod, from the volume (gate.PodCaller, or the layer set's).
	caller gate.Caller
	// namespace and policy (<namespace>/<name>) are the policy's, for records; a layered
	// bundle names its namespace only (a record's layers name each policy).
	namespace, policy string
	// digest is the snapshot's digest, or the layer set's fingerprint: the response's digest.
	// metricDigest is the snapshot's or the layers index's digest, one bounded label value.
	digest, metricDigest string
	// compileErrors are the rules that did not compile: they block under failurePolicy Fail.
	compileErrors error
}

// decider decides calls: a compiled policy, or a layered bundle's layers.
type decider interface {
	Decide(*gate.Call) gate.Decision
}

// bundle is what is loaded of one version of the volume. It is never changed once published:
// a load publishes a new one.
type bundle struct {
	version  string
	policies map[policyKey]*loadedPolicy
}

// readVersion is the version of the volume at dir: where its ..data points, or NoVersion when
// it has none (or a target that is not a version).
func readVersion(dir string) string {
	target, err := os.Readlink(filepath.Join(dir, kubeletData))
	if err != nil || target == NoVersion || !agentproto.ValidVersion(target) {
		return NoVersion
	}
	return target
}

// loadPolicy loads the bundle in dir as gate-hook loads it for the same flags, and compiles all
// of it once. With layered, the layers index must be there, and every file is read from one
// version of the volume (gate.LoadLayered); without, the snapshot alone, and the pod's name
// beside it.
func loadPolicy(dir string, key policyKey) *loadedPolicy {
	if key.layered {
		set, err := gate.LoadLayered(dir, key.workspace)
		if err != nil {
			return failed(err)
		}
		return &loadedPolicy{decider: set.Compile(), caller: set.Caller, namespace: set.Index.Namespace,
			digest: set.Fingerprint(), metricDigest: set.Index.Digest}
	}
	snap, err := gate.LoadSnapshotFile(filepath.Join(dir, gate.SnapshotFileName), key.workspace)
	if err != nil {
		return failed(err)
	}
	p, errs := gate.Compile(snap)
	lp := &loadedPolicy{decider: p, caller: gate.PodCaller(dir), policy: snap.Policy, digest: snap.Digest, metricDigest: snap.Digest}
	if ns, _, ok := strings.Cut(snap.Policy, "/"); ok {
		lp.namespace = ns
	}
	if len(errs) > 0 {
		lp.compileErrors = errs
	}
	return lp
}

// failed is the refusal that stands for a bundle that did not load: its error's code, or
// snapshot_corrupt, as gate-hook answers it.
func failed(err error) *loadedPolicy {
	se := &gate.SnapshotError{Code: gate.CodeSnapshotCorrupt, Reason: err.Error()}
	errors.As(err, &se)
	return &loadedPolicy{failure: se}
}

// unstable is the refusal of a request whose bundle kept changing while it was read.
var unstable = &loadedPolicy{failure: &gate.SnapshotError{Code: gate.CodeSnapshotMissing, Reason: "the policy volume kept changing while gate-agent read it"}}
