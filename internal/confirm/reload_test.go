package confirm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/testutil"
)

// kubeletVolume lays out a ConfigMap volume as kubelet does: the key is a symlink to
// ..data/<key>, and ..data is a symlink to a timestamped directory that an update replaces
// atomically.
type kubeletVolume struct {
	dir string
	n   int
}

func (v *kubeletVolume) publish(t *testing.T, key string, data []byte) {
	t.Helper()
	v.n++
	ts := filepath.Join(v.dir, "..2026_12_01_00_00_0"+string(rune('0'+v.n)))
	if err := os.MkdirAll(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, key), data, 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	os.Remove(tmp)
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(v.dir, key)
	if _, err := os.Lstat(link); os.IsNotExist(err) {
		if err := os.Symlink(filepath.Join("..data", key), link); err != nil {
			t.Fatal(err)
		}
	}
}

func snapshotBytes(t *testing.T, reason string) ([]byte, string) {
	t.Helper()
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/p", Generation: 1}, []gate.Rule{{Name: "r", Tools: []string{"bash"}, Action: gate.Block, Reason: reason}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Encode()
	return b, s.Digest
}

func TestReloaderFollowsTheSymlinkSwap(t *testing.T) {
	vol := &kubeletVolume{dir: t.TempDir()}
	first, firstDigest := snapshotBytes(t, "first")
	vol.publish(t, gate.SnapshotFileName, first)

	g := gate.New("")
	r := &Reloader{Gate: g, Path: filepath.Join(vol.dir, gate.SnapshotFileName), Interval: 200 * time.Millisecond, Log: logr.Discard()}
	if err := r.Load(); err != nil || r.Digest() != firstDigest {
		t.Fatalf("%v %s", err, r.Digest())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reloader: %v", err)
		}
	}()

	second, secondDigest := snapshotBytes(t, "second")
	vol.publish(t, gate.SnapshotFileName, second)
	testutil.WaitFor(t, func() bool { return r.Digest() == secondDigest })
	if d := g.Decide(&gate.Call{Tool: "bash", Input: map[string]any{}}); d.Reason != "second" {
		t.Fatalf("decision %+v", d)
	}

	// A bad update keeps the snapshot in force.
	vol.publish(t, gate.SnapshotFileName, []byte(`{"apiVersion":"tampered"`))
	if err := r.Load(); err == nil {
		t.Fatal("a tampered snapshot loaded")
	}
	if r.Digest() != secondDigest {
		t.Fatal("a bad snapshot replaced the good one")
	}
	if d := g.Decide(&gate.Call{Tool: "bash", Input: map[string]any{}}); d.Reason != "second" {
		t.Fatalf("decision %+v", d)
	}
}

func TestReloaderWithoutAGoodSnapshotRefuses(t *testing.T) {
	g := gate.New("")
	r := &Reloader{Gate: g, Path: filepath.Join(t.TempDir(), gate.SnapshotFileName), Log: logr.Discard()}
	if err := r.Load(); err == nil {
		t.Fatal("a missing snapshot loaded")
	}
	if d := g.Decide(&gate.Call{Tool: "read", Input: map[string]any{}}); d.Verdict != gate.Block || d.Code != gate.CodeSnapshotMissing {
		t.Fatalf("decision %+v", d)
	}
}

// TestReloaderNamesTheSnapshotInForce: the metrics (served apart from the gate API) carry the
// digest of the snapshot in force, one series, moved on a swap and kept on a bad update.
func TestReloaderNamesTheSnapshotInForce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, gate.SnapshotFileName)
	first, firstDigest := snapshotBytes(t, "first")
	second, secondDigest := snapshotBytes(t, "second")
	reg := prometheus.NewRegistry()
	r := &Reloader{Gate: gate.New(""), Path: path, Log: logr.Discard(), Metrics: NewMetrics(reg)}
	inForce := func() map[string]float64 {
		t.Helper()
		out := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "confirmer_snapshot_in_force" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "digest" {
						out[l.GetValue()] = m.GetGauge().GetValue()
					}
				}
			}
		}
		return out
	}
	for _, step := range []struct {
		data []byte
		want string
	}{{first, firstDigest}, {second, secondDigest}, {[]byte(`{"apiVersion":"tampered"`), secondDigest}} {
		if err := os.WriteFile(path, step.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_ = r.Load()
		if got := inForce(); len(got) != 1 || got[step.want] != 1 {
			t.Fatalf("confirmer_snapshot_in_force %v, want %s alone", got, step.want)
		}
	}
}

// publishAll publishes a new version of the volume holding exactly these files.
func (v *kubeletVolume) publishAll(t *testing.T, files map[string][]byte) {
	t.Helper()
	v.n++
	ts := filepath.Join(v.dir, "..2026_12_01_00_00_1"+string(rune('0'+v.n)))
	if err := os.MkdirAll(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, data := range files {
		if err := os.WriteFile(filepath.Join(ts, k), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	os.Remove(tmp)
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(v.dir)
	for _, e := range entries {
		if name := e.Name(); name[0] != '.' {
			if _, ok := files[name]; !ok {
				os.Remove(filepath.Join(v.dir, name)) // the kubelet removes what the new version lacks
			}
		}
	}
	for k := range files {
		if _, err := os.Lstat(filepath.Join(v.dir, k)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", k), filepath.Join(v.dir, k)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReloaderDecidesWithClusterLayers: the confirmer decides a layered bundle with every
// cluster layer, whatever its pod selector (it has no pod), names the deciding layer, and follows
// the bundle when it loses its layers.
func TestReloaderDecidesWithClusterLayers(t *testing.T) {
	primary, primaryDigest := snapshotBytes(t, "the namespace blocks bash")
	baseline, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "baseline", Generation: 1}, []gate.Rule{{Name: "no-read", Tools: []string{"read"}, Action: gate.Block, Reason: "the platform blocks reads"}})
	if err != nil {
		t.Fatal(err)
	}
	baselineBytes, _ := baseline.Encode()
	index, err := gate.BuildLayersIndex(gate.LayersIndex{Namespace: "agents", Namespaced: true, Layers: []gate.Layer{{
		Kind: gate.LayerKindCluster, Name: "baseline", File: gate.ClusterLayerFile("baseline"), Digest: baseline.Digest,
		PodSelector: []gate.Requirement{{Key: "tier", Operator: gate.OperatorIn, Values: []string{"untrusted"}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	vol := &kubeletVolume{dir: t.TempDir()}
	vol.publishAll(t, map[string][]byte{gate.SnapshotFileName: primary, gate.LayersFileName: index, gate.ClusterLayerFile("baseline"): baselineBytes})
	g := gate.New("")
	r := &Reloader{Gate: g, Path: filepath.Join(vol.dir, gate.SnapshotFileName), Log: logr.Discard()}
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	read := &gate.Call{Tool: "Read", Input: map[string]any{"file_path": "/workspace/a"}, Surface: gate.SurfaceManagedAgents}
	if d := g.Decide(read); d.Verdict != gate.Block || d.Layer != "ClusterHarnessAgentPolicy/baseline" {
		t.Fatalf("a read under a baseline that selects pods by label: %s by %s, want the baseline's Block", d.Verdict, d.Layer)
	}
	if d := g.Decide(&gate.Call{Tool: "Bash", Input: map[string]any{"command": "ls"}, Surface: gate.SurfaceManagedAgents}); d.Verdict != gate.Block || d.Layer != "HarnessAgentPolicy/agents/p" {
		t.Fatalf("the namespace policy's Block: %s by %s", d.Verdict, d.Layer)
	}

	// Corrupt layers keep the set in force; a bundle without layers is followed.
	vol.publishAll(t, map[string][]byte{gate.SnapshotFileName: primary, gate.LayersFileName: index, gate.ClusterLayerFile("baseline"): primary})
	if err := r.Load(); err == nil {
		t.Fatal("a layer whose digest is not the index's was loaded")
	}
	if d := g.Decide(read); d.Layer != "ClusterHarnessAgentPolicy/baseline" {
		t.Fatalf("a bad update replaced the layers in force: %+v", d)
	}
	vol.publishAll(t, map[string][]byte{gate.SnapshotFileName: primary})
	if err := r.Load(); err != nil || r.Digest() != primaryDigest {
		t.Fatalf("%v %s", err, r.Digest())
	}
	if d := g.Decide(read); d.Verdict != gate.Allow || d.Layer != "" {
		t.Fatalf("after the layers are gone: %s by %q", d.Verdict, d.Layer)
	}
}

// TestReloaderRefusesBrokenLayersAtStart: a layered bundle that does not load, with nothing in
// force, refuses every call with its code.
func TestReloaderRefusesBrokenLayersAtStart(t *testing.T) {
	primary, _ := snapshotBytes(t, "x")
	vol := &kubeletVolume{dir: t.TempDir()}
	vol.publishAll(t, map[string][]byte{gate.SnapshotFileName: primary, gate.LayersFileName: []byte(`{"apiVersion":"gate.intutic.io/v1alpha1"}`)})
	g := gate.New("")
	r := &Reloader{Gate: g, Path: filepath.Join(vol.dir, gate.SnapshotFileName), Log: logr.Discard()}
	if err := r.Load(); err == nil {
		t.Fatal("a broken layers index was loaded")
	}
	if d := g.Decide(&gate.Call{Tool: "Read", Input: map[string]any{}, Surface: gate.SurfaceManagedAgents}); d.Verdict != gate.Block || g.Ready() == nil {
		t.Fatalf("with a broken layered bundle and nothing in force: %s, ready %v", d.Verdict, g.Ready())
	}
}
