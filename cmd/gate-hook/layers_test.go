package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intutic/gate-operator/internal/gate"
)

// layeredBundle writes a layered bundle as the kubelet projects it: the files in a timestamped
// directory that ..data points to, each top-level entry a symlink through ..data. It returns
// the path of the bundle's snapshot, which --snapshot names.
func layeredBundle(t *testing.T, primary *gate.Snapshot, labels string, layers ...clusterPolicy) string {
	t.Helper()
	return layeredBundleWith(t, primary, labels, nil, layers...)
}

// layeredBundleWith is layeredBundle with the index edited (its exceptions, say) before it is
// built; edit may be nil.
func layeredBundleWith(t *testing.T, primary *gate.Snapshot, labels string, edit func(*gate.LayersIndex), layers ...clusterPolicy) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{gate.PodNameFile: []byte("agent-0")}
	if labels != "" {
		files[gate.PodLabelsFile] = []byte(labels)
	}
	idx := gate.LayersIndex{Namespace: "agents", Namespaced: primary != nil}
	for _, l := range layers {
		idx.Layers = append(idx.Layers, l.layer)
		files[l.layer.File] = encoded(t, l.snap)
	}
	if edit != nil {
		edit(&idx)
	}
	data, err := gate.BuildLayersIndex(idx)
	if err != nil {
		t.Fatal(err)
	}
	files[gate.LayersFileName] = data
	if primary != nil {
		files[gate.SnapshotFileName] = encoded(t, primary)
	}
	const ts = "..2026_12_04_22_00_00.0001"
	for name, data := range files {
		path := filepath.Join(dir, ts, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(ts, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, ts))
	for _, e := range entries {
		if err := os.Symlink(filepath.Join("..data", e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, gate.SnapshotFileName)
}

func encoded(t *testing.T, s *gate.Snapshot) []byte {
	t.Helper()
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// clusterPolicy is a cluster layer of a bundle and its snapshot, which names the bare cluster
// policy.
type clusterPolicy struct {
	layer gate.Layer
	snap  *gate.Snapshot
}

func clusterLayer(t *testing.T, name string, priority int32, rules []gate.Rule, sel ...gate.Requirement) clusterPolicy {
	t.Helper()
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: name, Generation: 1}, rules)
	if err != nil {
		t.Fatal(err)
	}
	return clusterPolicy{gate.Layer{Kind: gate.LayerKindCluster, Name: name, Priority: priority, PodSelector: sel, File: gate.ClusterLayerFile(name), Digest: s.Digest}, s}
}

func namespaceSnap(t *testing.T, rules ...gate.Rule) *gate.Snapshot {
	t.Helper()
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1}, rules)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantDeny(t *testing.T, r result, reason string) {
	t.Helper()
	msg := gate.RefusalPrefix + reason
	if d := decision(t, r.stdout); r.exit != 2 || d.PermissionDecision != "deny" || !strings.HasPrefix(d.PermissionDecisionReason, msg) || !strings.HasPrefix(r.stderr, msg) {
		t.Fatalf("want a deny starting %q with exit 2, got %+v", msg, r)
	}
}

func TestLayeredHook(t *testing.T) {
	noRm := gate.Rule{Name: "no-rm", Tools: []string{"bash"}, When: `input.command.contains("rm ")`, Action: gate.Block, Reason: "the cluster forbids rm"}
	allowBash := gate.Rule{Name: "bash-ok", Tools: []string{"bash"}, Action: gate.Allow, Reason: "bash is fine here"}
	noCurl := gate.Rule{Name: "no-curl", Tools: []string{"bash"}, When: `input.command.contains("curl")`, Action: gate.Block, Reason: "the namespace forbids curl"}
	rm := payload("Bash", map[string]any{"command": "rm -rf /tmp/x " + secret}, nil)
	curl := payload("Bash", map[string]any{"command": "curl https://example.com " + secret}, nil)
	ls := payload("Bash", map[string]any{"command": "ls"}, nil)

	t.Run("cluster Block beats namespace Allow", func(t *testing.T) {
		snap := layeredBundle(t, namespaceSnap(t, allowBash), "", clusterLayer(t, "baseline", 0, []gate.Rule{noRm}))
		wantDeny(t, runHook(t, rm, nil, "--snapshot", snap, "--layers"), "the cluster forbids rm")
		if r := runHook(t, ls, nil, "--snapshot", snap, "--layers"); r.exit != 0 || r.stdout != "" {
			t.Fatalf("a call no layer holds: %+v", r)
		}
		// Without --layers the hook decides with the namespace's snapshot alone, as before.
		if r := runHook(t, rm, nil, "--snapshot", snap); r.exit != 0 || r.stdout != "" {
			t.Fatalf("without --layers: %+v", r)
		}
	})
	t.Run("the first layer in report order gives the reason", func(t *testing.T) {
		early := gate.Rule{Name: "no-rm-early", Tools: []string{"bash"}, When: `input.command.contains("rm ")`, Action: gate.Block, Reason: "the platform forbids rm"}
		snap := layeredBundle(t, namespaceSnap(t, noRm), "", clusterLayer(t, "zz-late", 5, []gate.Rule{noRm}), clusterLayer(t, "platform", -1, []gate.Rule{early}))
		wantDeny(t, runHook(t, rm, nil, "--snapshot", snap, "--layers"), "the platform forbids rm")
	})
	t.Run("namespace Block beats cluster Allow", func(t *testing.T) {
		snap := layeredBundle(t, namespaceSnap(t, noCurl), "", clusterLayer(t, "permissive", 0, []gate.Rule{allowBash}))
		wantDeny(t, runHook(t, curl, nil, "--snapshot", snap, "--layers"), "the namespace forbids curl")
	})
	t.Run("pod labels deselect a layer", func(t *testing.T) {
		web := gate.Requirement{Key: "app", Operator: gate.OperatorIn, Values: []string{"web"}}
		layer := clusterLayer(t, "web-tier", 0, []gate.Rule{noRm}, web)
		db := layeredBundle(t, namespaceSnap(t), `app="db"`+"\n"+`tier="backend"`, layer)
		if r := runHook(t, rm, nil, "--snapshot", db, "--layers"); r.exit != 0 || r.stdout != "" {
			t.Fatalf("a layer that does not select the pod decided: %+v", r)
		}
		webPod := layeredBundle(t, namespaceSnap(t), `app="web"`, layer)
		wantDeny(t, runHook(t, rm, nil, "--snapshot", webPod, "--layers"), "the cluster forbids rm")
		noLabels := layeredBundle(t, namespaceSnap(t), "", layer)
		wantDeny(t, runHook(t, rm, nil, "--snapshot", noLabels, "--layers"), "no pod labels file at ")
	})
	t.Run("no policy selects the pod", func(t *testing.T) {
		only := clusterLayer(t, "web-only", 0, []gate.Rule{allowBash}, gate.Requirement{Key: "app", Operator: gate.OperatorExists})
		snap := layeredBundle(t, nil, `tier="x"`, only)
		wantDeny(t, runHook(t, ls, nil, "--snapshot", snap, "--layers"), "no policy selects this pod")
	})
	t.Run("missing index", func(t *testing.T) {
		snap := writeSnapshot(t, "")
		wantDeny(t, runHook(t, ls, nil, "--snapshot", snap, "--layers"), "no policy layers index at ")
	})
	t.Run("a rule that needs CEL is handed on", func(t *testing.T) {
		// caller is not something a prefilter reads: gate-hook hands the call to gate-hook-cel,
		// which sees the bundle's namespace as the cluster layer's caller.namespace.
		byNamespace := gate.Rule{Name: "agents-ns", Tools: []string{"bash"}, When: `caller.namespace == "agents" && caller.policy == "ns-aware" && caller.pod == "agent-0"`, Action: gate.Block, Reason: "not in namespace agents"}
		snap := layeredBundle(t, namespaceSnap(t), "", clusterLayer(t, "ns-aware", 0, []gate.Rule{byNamespace}))
		wantDeny(t, runHook(t, ls, nil, "--snapshot", snap, "--layers"), "not in namespace agents")
	})
}

// TestLayeredHookExceptions: an exception in the index lifts a Block rule until its expiresAt
// and no longer, with nothing but the bundle to go on (the hook reads the clock itself).
func TestLayeredHookExceptions(t *testing.T) {
	noRm := gate.Rule{Name: "no-rm", Tools: []string{"bash"}, When: `input.command.contains("rm ")`, Action: gate.Block, Reason: "the cluster forbids rm"}
	noCurl := gate.Rule{Name: "no-curl", Tools: []string{"bash"}, When: `input.command.contains("curl")`, Action: gate.Block, Reason: "the namespace forbids curl"}
	rm := payload("Bash", map[string]any{"command": "rm -rf /tmp/x " + secret}, nil)
	curl := payload("Bash", map[string]any{"command": "curl https://example.com " + secret}, nil)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	past := time.Now().Add(-time.Second).UTC().Format(time.RFC3339)
	lift := func(rule, expiresAt string) []gate.Exception {
		return []gate.Exception{{Name: "incident-42", Rules: []string{rule}, Tools: []string{"bash"}, ExpiresAt: expiresAt}}
	}
	t.Run("a cluster layer's rule", func(t *testing.T) {
		for _, tc := range []struct {
			expiresAt string
			allowed   bool
		}{{future, true}, {past, false}} {
			layer := clusterLayer(t, "baseline", 0, []gate.Rule{noRm})
			layer.layer.Exceptions = lift("no-rm", tc.expiresAt)
			snap := layeredBundle(t, namespaceSnap(t), "", layer)
			r := runHook(t, rm, nil, "--snapshot", snap, "--layers")
			if !tc.allowed {
				wantDeny(t, r, "the cluster forbids rm")
			} else if r.exit != 0 || r.stdout != "" {
				t.Fatalf("expiresAt %s: the lifted rule still decided: %+v", tc.expiresAt, r)
			}
		}
	})
	t.Run("the namespace's rule, with no cluster layer", func(t *testing.T) {
		for _, tc := range []struct {
			expiresAt string
			allowed   bool
		}{{future, true}, {past, false}} {
			snap := layeredBundleWith(t, namespaceSnap(t, noCurl), "", func(idx *gate.LayersIndex) { idx.Exceptions = lift("no-curl", tc.expiresAt) })
			r := runHook(t, curl, nil, "--snapshot", snap, "--layers")
			if !tc.allowed {
				wantDeny(t, r, "the namespace forbids curl")
			} else if r.exit != 0 || r.stdout != "" {
				t.Fatalf("expiresAt %s: the lifted rule still decided: %+v", tc.expiresAt, r)
			}
		}
	})
}
