package gate_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/intutic/gate-operator/internal/gate"
)

// clusterSnap builds the snapshot of a cluster layer: its policy is the bare CHAP name.
func clusterSnap(t testing.TB, name string, meta gate.PolicyMeta, rules ...gate.Rule) *gate.Snapshot {
	t.Helper()
	meta.Policy = name
	s, err := gate.BuildSnapshot(meta, rules)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func layerOf(s *gate.Snapshot, priority int32, sel ...gate.Requirement) gate.Layer {
	return gate.Layer{Kind: gate.LayerKindCluster, Name: s.Policy, Priority: priority, PodSelector: sel, File: gate.ClusterLayerFile(s.Policy), Digest: s.Digest}
}

func mustIndex(t testing.TB, idx gate.LayersIndex) (*gate.LayersIndex, []byte) {
	t.Helper()
	data, err := gate.BuildLayersIndex(idx)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := gate.LoadLayersIndex(data, idx.WorkspaceID)
	if err != nil {
		t.Fatal(err)
	}
	return loaded, data
}

func snapErrCode(t *testing.T, err error) string {
	t.Helper()
	var se *gate.SnapshotError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is %T, want *gate.SnapshotError", err, err)
	}
	return se.Code
}

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func rawLayer(name string, prio int32, sel ...gate.Requirement) gate.Layer {
	return gate.Layer{Kind: gate.LayerKindCluster, Name: name, Priority: prio, PodSelector: sel, File: gate.ClusterLayerFile(name), Digest: digestA}
}

func TestLayersIndexRoundTripAndDeterminism(t *testing.T) {
	idx := gate.LayersIndex{Namespace: "team-a", WorkspaceID: "ws_1", Namespaced: true, Layers: []gate.Layer{
		rawLayer("zeta", 5, gate.Requirement{Key: "tier", Operator: gate.OperatorIn, Values: []string{"b", "a", "b"}}, gate.Requirement{Key: "app", Operator: gate.OperatorExists}),
		rawLayer("alpha", 5),
		rawLayer("base", -3, gate.Requirement{Key: "example.com/team", Operator: gate.OperatorNotIn, Values: []string{"x"}}),
	}}
	first, err := gate.BuildLayersIndex(idx)
	if err != nil {
		t.Fatal(err)
	}
	// The same index in another order, with its caller's slices left as they were.
	shuffled := idx
	shuffled.Layers = []gate.Layer{idx.Layers[2], idx.Layers[0], idx.Layers[1]}
	shuffled.Layers[1].PodSelector = []gate.Requirement{idx.Layers[0].PodSelector[1], {Key: "tier", Operator: gate.OperatorIn, Values: []string{"a", "b"}}}
	second, err := gate.BuildLayersIndex(shuffled)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("the same index encodes differently:\n%s\n%s", first, second)
	}
	if got := idx.Layers[0].PodSelector[0].Values; !reflect.DeepEqual(got, []string{"b", "a", "b"}) {
		t.Fatalf("BuildLayersIndex changed its argument's values: %q", got)
	}
	loaded, err := gate.LoadLayersIndex(first, "ws_1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range loaded.Layers {
		names = append(names, l.Name)
	}
	if !reflect.DeepEqual(names, []string{"base", "alpha", "zeta"}) {
		t.Fatalf("report order %q, want priority then name", names)
	}
	if sel := loaded.Layers[2].PodSelector; sel[0].Key != "app" || !reflect.DeepEqual(sel[1].Values, []string{"a", "b"}) {
		t.Fatalf("requirements not sorted and values not deduplicated: %+v", sel)
	}
	if loaded.APIVersion != gate.SnapshotAPIVersion || loaded.Kind != gate.LayersKind || !strings.HasPrefix(loaded.Digest, "sha256:") {
		t.Fatalf("header not filled: %+v", loaded)
	}
	again, err := gate.BuildLayersIndex(*loaded)
	if err != nil || !bytes.Equal(again, first) {
		t.Fatalf("a loaded index rebuilds to other bytes (%v):\n%s\n%s", err, again, first)
	}
	if !bytes.HasSuffix(first, []byte(`,"digest":"`+loaded.Digest+`"}`+"\n")) {
		t.Fatalf("the digest is not the last member: %s", first)
	}
	empty, err := gate.BuildLayersIndex(gate.LayersIndex{Namespace: "team-a", Namespaced: true})
	if err != nil || !bytes.Contains(empty, []byte(`"layers":[]`)) {
		t.Fatalf("an index without cluster layers: %s %v", empty, err)
	}
}

func TestLayersIndexValidation(t *testing.T) {
	ok := func() gate.LayersIndex {
		return gate.LayersIndex{Namespace: "team-a", Layers: []gate.Layer{rawLayer("a", 0), rawLayer("b", 1)}}
	}
	cases := []struct {
		name  string
		edit  func(*gate.LayersIndex)
		error string
	}{
		{"namespace empty", func(i *gate.LayersIndex) { i.Namespace = "" }, "namespace"},
		{"namespace not a label", func(i *gate.LayersIndex) { i.Namespace = "Team.A" }, "namespace"},
		{"names repeated across priorities", func(i *gate.LayersIndex) { i.Layers[1] = rawLayer("a", 7) }, "already the name"},
		{"kind", func(i *gate.LayersIndex) { i.Layers[0].Kind = "HarnessAgentPolicy" }, "kind"},
		{"name too long", func(i *gate.LayersIndex) { i.Layers[0] = rawLayer(strings.Repeat("a", 64), 0) }, "DNS label"},
		{"name with a dot", func(i *gate.LayersIndex) { i.Layers[0] = rawLayer("a.b", 0) }, "DNS label"},
		{"name upper case", func(i *gate.LayersIndex) { i.Layers[0] = rawLayer("A", 0) }, "DNS label"},
		{"file", func(i *gate.LayersIndex) { i.Layers[0].File = "policy-snapshot.rules" }, "file"},
		{"digest not sha256", func(i *gate.LayersIndex) { i.Layers[0].Digest = "md5:abc" }, "digest"},
		{"digest upper hex", func(i *gate.LayersIndex) { i.Layers[0].Digest = strings.ToUpper(digestA) }, "digest"},
		{"digest short", func(i *gate.LayersIndex) { i.Layers[0].Digest = digestA[:70] }, "digest"},
		{"unknown operator", func(i *gate.LayersIndex) {
			i.Layers[0].PodSelector = []gate.Requirement{{Key: "a", Operator: "Gt", Values: []string{"1"}}}
		}, "operator"},
		{"In without values", func(i *gate.LayersIndex) {
			i.Layers[0].PodSelector = []gate.Requirement{{Key: "a", Operator: gate.OperatorIn}}
		}, "at least one value"},
		{"NotIn without values", func(i *gate.LayersIndex) {
			i.Layers[0].PodSelector = []gate.Requirement{{Key: "a", Operator: gate.OperatorNotIn}}
		}, "at least one value"},
		{"Exists with values", func(i *gate.LayersIndex) {
			i.Layers[0].PodSelector = []gate.Requirement{{Key: "a", Operator: gate.OperatorExists, Values: []string{"x"}}}
		}, "takes no values"},
		{"DoesNotExist with values", func(i *gate.LayersIndex) {
			i.Layers[0].PodSelector = []gate.Requirement{{Key: "a", Operator: gate.OperatorDoesNotExist, Values: []string{"x"}}}
		}, "takes no values"},
		{"key empty", func(i *gate.LayersIndex) {
			i.Layers[0].PodSelector = []gate.Requirement{{Key: "", Operator: gate.OperatorExists}}
		}, "label key"},
		{"key with bad prefix", func(i *gate.LayersIndex) {
			i.Layers[0].PodSelector = []gate.Requirement{{Key: "Example.com/a", Operator: gate.OperatorExists}}
		}, "label key"},
		{"value too long", func(i *gate.LayersIndex) {
			i.Layers[0].PodSelector = []gate.Requirement{{Key: "a", Operator: gate.OperatorIn, Values: []string{strings.Repeat("v", 64)}}}
		}, "label value"},
	}
	if _, err := gate.BuildLayersIndex(ok()); err != nil {
		t.Fatalf("the valid index: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			idx := ok()
			tc.edit(&idx)
			if _, err := gate.BuildLayersIndex(idx); err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Fatalf("want an error about %q, got %v", tc.error, err)
			}
		})
	}
}

func TestLoadLayersIndexRefuses(t *testing.T) {
	_, data := mustIndex(t, gate.LayersIndex{Namespace: "team-a", WorkspaceID: "ws_1", Layers: []gate.Layer{rawLayer("a", 0)}})
	cases := []struct {
		name, workspace string
		data            []byte
		code, reason    string
	}{
		{"empty", "", nil, gate.CodeSnapshotMissing, "empty"},
		{"not JSON", "", data[:20], gate.CodeSnapshotCorrupt, "not valid JSON"},
		{"unknown field", "", bytes.Replace(data, []byte(`"namespaced"`), []byte(`"extra":1,"namespaced"`), 1), gate.CodeSnapshotCorrupt, "not valid JSON"},
		{"a snapshot, not an index", "", bytes.Replace(data, []byte(gate.LayersKind), []byte(gate.SnapshotKind), 1), gate.CodeSnapshotCorrupt, "malformed"},
		{"tampered", "", bytes.Replace(data, []byte(`"priority":0`), []byte(`"priority":9`), 1), gate.CodeSnapshotUnverified, "does not match"},
		{"digest not last", "", bytes.Replace(data, []byte(`{"apiVersion"`), []byte(`{"digest":"x","apiVersion"`), 1), gate.CodeSnapshotCorrupt, "not valid JSON"},
		{"another workspace", "ws_2", data, gate.CodeSnapshotUnverified, `for workspace "ws_1", not "ws_2"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gate.LoadLayersIndex(tc.data, tc.workspace)
			if err == nil || snapErrCode(t, err) != tc.code || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("want %s about %q, got %v", tc.code, tc.reason, err)
			}
		})
	}
	if _, err := gate.LoadLayersIndex(data, ""); err != nil {
		t.Fatalf("no workspace asked: %v", err)
	}
}

func TestParsePodLabels(t *testing.T) {
	good := []struct {
		in   string
		want map[string]string
	}{
		{"", map[string]string{}},
		{"\n", map[string]string{}},
		{`app="web"`, map[string]string{"app": "web"}},
		{"app=\"web\"\nexample.com/team=\"a-b_c.d\"\ntier=\"\"\n", map[string]string{"app": "web", "example.com/team": "a-b_c.d", "tier": ""}},
		{`z="1"` + "\n" + `a="2"`, map[string]string{"z": "1", "a": "2"}},
	}
	for _, tc := range good {
		got, err := gate.ParsePodLabels([]byte(tc.in))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParsePodLabels(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	bad := []string{
		`app=web`, `app`, `="web"`, `app="web`, `app="web" `, ` app="web"`, "app=\"web\"\n\ntier=\"a\"",
		"app=\"web\"\r\n", `app='w'`, "app=`web`", `app="we b"`, `app="` + strings.Repeat("x", 64) + `"`,
		`a/b/c="x"`, `app="a"` + "\n" + `app="b"`, `app="\x00"`, `app="web"="x"`,
		strings.Repeat(`a="b"`+"\n", 60000),
	}
	for _, in := range bad {
		if got, err := gate.ParsePodLabels([]byte(in)); err == nil {
			t.Errorf("ParsePodLabels(%.40q) = %v, want an error", in, got)
		}
	}
}

// TestSelectsAgreesWithLabelSelector: Layer.Selects decides as apimachinery's label selectors
// do, over random selectors and label sets drawn from a small alphabet so they collide.
func TestSelectsAgreesWithLabelSelector(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	keys, values := []string{"app", "tier", "example.com/team", "x"}, []string{"", "a", "b", "c"}
	ops := []struct {
		ours string
		k8s  selection.Operator
	}{{gate.OperatorIn, selection.In}, {gate.OperatorNotIn, selection.NotIn}, {gate.OperatorExists, selection.Exists}, {gate.OperatorDoesNotExist, selection.DoesNotExist}}
	matched := 0
	for n := range 5000 {
		var layer gate.Layer
		sel := labels.NewSelector()
		for range rng.Intn(4) {
			op := ops[rng.Intn(len(ops))]
			r := gate.Requirement{Key: keys[rng.Intn(len(keys))], Operator: op.ours}
			if op.ours == gate.OperatorIn || op.ours == gate.OperatorNotIn {
				for range 1 + rng.Intn(3) {
					r.Values = append(r.Values, values[rng.Intn(len(values))])
				}
			}
			req, err := labels.NewRequirement(r.Key, op.k8s, r.Values)
			if err != nil {
				t.Fatal(err)
			}
			sel = sel.Add(*req)
			layer.PodSelector = append(layer.PodSelector, r)
		}
		set := map[string]string{}
		for _, k := range keys {
			if rng.Intn(2) == 0 {
				set[k] = values[rng.Intn(len(values))]
			}
		}
		want := sel.Matches(labels.Set(set))
		if got := layer.Selects(set); got != want {
			t.Fatalf("case %d: selector %+v on %v: Selects %v, apimachinery %v", n, layer.PodSelector, set, got, want)
		}
		if want {
			matched++
		}
	}
	if matched < 500 || matched > 4500 {
		t.Fatalf("%d of 5000 cases matched: the cases do not exercise both outcomes", matched)
	}
}

// volume is a fake projected volume as the kubelet's atomic writer lays it out: the files in a
// timestamped directory, ..data a symlink to it, and each top-level entry a symlink through
// ..data.
type volume struct {
	t       *testing.T
	dir     string
	version int
}

func newVolume(t *testing.T, files map[string][]byte) *volume {
	v := &volume{t: t, dir: t.TempDir()}
	v.publish(files)
	return v
}

// publish writes a new version of the volume and swaps ..data to it, as the kubelet does.
func (v *volume) publish(files map[string][]byte) {
	t := v.t
	v.version++
	ts := fmt.Sprintf("..2026_12_04_21_00_0%d.000%d", v.version, v.version)
	top := map[string]bool{}
	for name, data := range files {
		path := filepath.Join(v.dir, ts, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		top[strings.SplitN(name, "/", 2)[0]] = true
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range top {
		link := filepath.Join(v.dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			t.Fatal(err)
		}
	}
}

// bundle is the files of a layered bundle.
func bundle(t testing.TB, idx gate.LayersIndex, primary *gate.Snapshot, layers ...*gate.Snapshot) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	data, err := gate.BuildLayersIndex(idx)
	if err != nil {
		t.Fatal(err)
	}
	files[gate.LayersFileName] = data
	if primary != nil {
		files[gate.SnapshotFileName] = encode(t, primary)
	}
	for _, s := range layers {
		files[gate.ClusterLayerFile(s.Policy)] = encode(t, s)
	}
	return files
}

func encode(t testing.TB, s *gate.Snapshot) []byte {
	t.Helper()
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func nsSnap(t testing.TB, meta gate.PolicyMeta, rules ...gate.Rule) *gate.Snapshot {
	t.Helper()
	if meta.Policy == "" {
		meta.Policy = "team-a/agents"
	}
	s, err := gate.BuildSnapshot(meta, rules)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	bashRm = &gate.Call{Tool: "Bash", Input: map[string]any{"command": "rm -rf /tmp/x"}, Surface: gate.SurfaceHook}
	bashLs = &gate.Call{Tool: "Bash", Input: map[string]any{"command": "ls"}, Surface: gate.SurfaceHook}
)

func decideLayered(t *testing.T, dir string, c *gate.Call) gate.Decision {
	t.Helper()
	set, err := gate.LoadLayered(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	call := *c
	call.Caller = set.Caller
	return set.CompileFor(call.Tool, call.Server).Decide(&call)
}

func TestLoadLayeredReadsOneVersion(t *testing.T) {
	noRm := gate.Rule{Name: "no-rm", Tools: []string{"bash"}, When: `input.command.contains("rm ")`, Action: gate.Block, Reason: "no rm"}
	v1 := clusterSnap(t, "baseline", gate.PolicyMeta{Generation: 1})
	v2 := clusterSnap(t, "baseline", gate.PolicyMeta{Generation: 2}, noRm)
	idx := func(s *gate.Snapshot) gate.LayersIndex {
		return gate.LayersIndex{Namespace: "team-a", Layers: []gate.Layer{layerOf(s, 0)}}
	}
	one := bundle(t, idx(v1), nil, v1)
	one[gate.PodNameFile] = []byte("agent-0")
	vol := newVolume(t, one)
	if d := decideLayered(t, vol.dir, bashRm); d.Verdict != gate.Allow || d.Layer != "ClusterHarnessAgentPolicy/baseline" {
		t.Fatalf("version 1: %+v", d)
	}
	two := bundle(t, idx(v2), nil, v2)
	two[gate.PodNameFile] = []byte("agent-1")
	vol.publish(two)
	// The top-level index is replaced by a regular file of version 1, as if read before the
	// swap: the loader must not read it, only ..data's version, which is consistent.
	top := filepath.Join(vol.dir, gate.LayersFileName)
	if err := os.Remove(top); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(top, one[gate.LayersFileName], 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := gate.LoadLayered(vol.dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if set.Caller.Pod != "agent-1" {
		t.Fatalf("pod name %q, want version 2's", set.Caller.Pod)
	}
	if d := decideLayered(t, vol.dir, bashRm); d.Verdict != gate.Block || d.Rule != "no-rm" || d.SnapshotDigest != v2.Digest {
		t.Fatalf("version 2: %+v", d)
	}
	// Without ..data (a plain directory), the files are read from dir itself.
	plain := t.TempDir()
	for name, data := range two {
		path := filepath.Join(plain, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if d := decideLayered(t, plain, bashRm); d.Verdict != gate.Block {
		t.Fatalf("a plain directory: %+v", d)
	}
}

func TestLoadLayeredFaults(t *testing.T) {
	allowAll := clusterSnap(t, "baseline", gate.PolicyMeta{})
	other := clusterSnap(t, "baseline", gate.PolicyMeta{Generation: 9})
	ns := nsSnap(t, gate.PolicyMeta{})
	byTeam := gate.Requirement{Key: "team", Operator: gate.OperatorIn, Values: []string{"a"}}
	base := func() gate.LayersIndex {
		return gate.LayersIndex{Namespace: "team-a", Namespaced: true, Layers: []gate.Layer{layerOf(allowAll, 0, byTeam)}}
	}
	cases := []struct {
		name   string
		files  func() map[string][]byte
		code   string
		reason string
	}{
		{"no index", func() map[string][]byte {
			f := bundle(t, base(), ns, allowAll)
			delete(f, gate.LayersFileName)
			return f
		}, gate.CodeSnapshotMissing, "no policy layers index at "},
		{"layer file of another digest", func() map[string][]byte {
			f := bundle(t, base(), ns, allowAll)
			f[gate.ClusterLayerFile("baseline")] = encode(t, other)
			f[gate.PodLabelsFile] = []byte(`team="a"`)
			return f
		}, gate.CodeSnapshotUnverified, "cluster layer baseline has digest"},
		{"layer file missing", func() map[string][]byte {
			f := bundle(t, base(), ns)
			f[gate.PodLabelsFile] = []byte(`team="a"`)
			return f
		}, gate.CodeSnapshotMissing, "cluster layer baseline: no policy snapshot at "},
		{"layer file tampered", func() map[string][]byte {
			f := bundle(t, base(), ns, allowAll)
			f[gate.ClusterLayerFile("baseline")] = bytes.Replace(f[gate.ClusterLayerFile("baseline")], []byte(`"Allow"`), []byte(`"Block"`), 1)
			f[gate.PodLabelsFile] = []byte(`team="a"`)
			return f
		}, gate.CodeSnapshotUnverified, "cluster layer baseline: the policy snapshot digest"},
		{"layer file corrupt", func() map[string][]byte {
			f := bundle(t, base(), ns, allowAll)
			f[gate.ClusterLayerFile("baseline")] = []byte(`{"apiVersion":`)
			f[gate.PodLabelsFile] = []byte(`team="a"`)
			return f
		}, gate.CodeSnapshotCorrupt, "cluster layer baseline: the policy snapshot is not valid JSON"},
		{"labels missing when a layer selects by them", func() map[string][]byte {
			return bundle(t, base(), ns, allowAll)
		}, gate.CodeSnapshotMissing, "no pod labels file at "},
		{"labels malformed", func() map[string][]byte {
			f := bundle(t, base(), ns, allowAll)
			f[gate.PodLabelsFile] = []byte("team=a")
			return f
		}, gate.CodeSnapshotCorrupt, "pod labels file"},
		{"namespace snapshot missing", func() map[string][]byte {
			f := bundle(t, base(), nil, allowAll)
			f[gate.PodLabelsFile] = []byte(`team="a"`)
			return f
		}, gate.CodeSnapshotMissing, "no policy snapshot at "},
		{"namespace snapshot of another namespace", func() map[string][]byte {
			f := bundle(t, base(), nsSnap(t, gate.PolicyMeta{Policy: "team-b/agents"}), allowAll)
			f[gate.PodLabelsFile] = []byte(`team="a"`)
			return f
		}, gate.CodeSnapshotUnverified, `of policy "team-b/agents"`},
		{"layer snapshot of another policy", func() map[string][]byte {
			idx := base()
			impostor := clusterSnap(t, "impostor", gate.PolicyMeta{})
			idx.Layers[0].Digest = impostor.Digest
			f := bundle(t, idx, ns)
			f[gate.ClusterLayerFile("baseline")] = encode(t, impostor)
			f[gate.PodLabelsFile] = []byte(`team="a"`)
			return f
		}, gate.CodeSnapshotUnverified, `cluster layer baseline is of policy "impostor"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vol := newVolume(t, tc.files())
			_, err := gate.LoadLayered(vol.dir, "")
			if err == nil || snapErrCode(t, err) != tc.code || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("want %s about %q, got %v", tc.code, tc.reason, err)
			}
		})
	}
	// Labels are not read unless a layer selects by them; a layer that does not select the
	// pod is not read at all.
	idx := base()
	idx.Layers[0].PodSelector = nil
	vol := newVolume(t, bundle(t, idx, ns, allowAll))
	if d := decideLayered(t, vol.dir, bashLs); d.Verdict != gate.Allow {
		t.Fatalf("no selector, no labels file: %+v", d)
	}
	f := bundle(t, base(), ns)
	f[gate.PodLabelsFile] = []byte(`team="b"`)
	vol = newVolume(t, f)
	if d := decideLayered(t, vol.dir, bashLs); d.Verdict != gate.Allow || d.Layer != "HarnessAgentPolicy/team-a/agents" || len(d.Layers) != 1 {
		t.Fatalf("a deselected layer's file is not needed: %+v", d)
	}
}

// TestClusterLayerCaller: a cluster layer's rules see the bundle's namespace and the cluster
// policy's name as caller.namespace and caller.policy.
func TestClusterLayerCaller(t *testing.T) {
	if !gate.BuiltWithCEL {
		t.Skip("needs CEL")
	}
	rules := []gate.Rule{
		{Name: "team-a-only", Tools: []string{"bash"}, When: `caller.namespace == "team-a" && caller.policy == "baseline" && caller.pod == "agent-0"`, Action: gate.Block, Reason: "team-a may not"},
	}
	s := clusterSnap(t, "baseline", gate.PolicyMeta{}, rules...)
	for ns, want := range map[string]gate.Verdict{"team-a": gate.Block, "team-b": gate.Allow} {
		idx, _ := mustIndex(t, gate.LayersIndex{Namespace: ns, Layers: []gate.Layer{layerOf(s, 0)}})
		set, err := gate.NewLayerSet(idx, nil, map[string]*gate.Snapshot{"baseline": s}, nil)
		if err != nil {
			t.Fatal(err)
		}
		call := *bashLs
		call.Caller = gate.Caller{Pod: "agent-0", Namespace: "forged", Policy: "forged"}
		for _, lp := range []*gate.LayeredPolicy{set.Compile(), set.CompileFor("Bash", "")} {
			if d := lp.Decide(&call); d.Verdict != want {
				t.Fatalf("namespace %s: %+v, want %s", ns, d, want)
			}
		}
	}
	// A policy compiled on its own still sees the snapshot's namespace, which is none.
	p, _ := gate.Compile(s)
	if d := p.Decide(bashLs); d.Verdict != gate.Allow {
		t.Fatalf("the same snapshot outside a layer set: %+v", d)
	}
}

func TestCombine(t *testing.T) {
	allow := gate.Decision{Verdict: gate.Allow, Reason: "ok", IncidentID: "i1", SnapshotDigest: "d1"}
	ask := gate.Decision{Verdict: gate.Ask, Rule: "ask-rule", Reason: "ask", IncidentID: "i2", SnapshotDigest: "d2"}
	block := gate.Decision{Verdict: gate.Block, Rule: "b", Reason: "no", Code: "c", Message: gate.RefusalPrefix + "no", IncidentID: "i3", SnapshotDigest: "d3"}
	block2 := block
	block2.Rule, block2.IncidentID = "b2", "i4"
	wouldBlock := allow
	wouldBlock.Would = &gate.AuditedVerdict{Verdict: gate.Block, Rule: "wb", Reason: "would"}
	wouldAsk := allow
	wouldAsk.Would = &gate.AuditedVerdict{Verdict: gate.Ask, Rule: "wa", Reason: "would ask"}
	ld := func(id string, d gate.Decision) gate.LayerDecision { return gate.LayerDecision{Layer: id, Decision: d} }
	cases := []struct {
		name        string
		in          []gate.LayerDecision
		verdict     gate.Verdict
		layer, rule string
		incident    string
		wouldRule   string
	}{
		{"allow and allow", []gate.LayerDecision{ld("A", allow), ld("N", allow)}, gate.Allow, "A", "", "i1", ""},
		{"namespace ask beats cluster allow", []gate.LayerDecision{ld("A", allow), ld("N", ask)}, gate.Ask, "N", "ask-rule", "i2", ""},
		{"cluster block beats namespace allow", []gate.LayerDecision{ld("A", block), ld("N", allow)}, gate.Block, "A", "b", "i3", ""},
		{"tie: the first", []gate.LayerDecision{ld("A", block2), ld("B", block), ld("N", block)}, gate.Block, "A", "b2", "i4", ""},
		{"would stricter than the result", []gate.LayerDecision{ld("A", wouldAsk), ld("B", wouldBlock), ld("N", allow)}, gate.Allow, "A", "", "i1", "wb"},
		{"would not stricter", []gate.LayerDecision{ld("A", wouldAsk), ld("N", ask)}, gate.Ask, "N", "ask-rule", "i2", ""},
		{"would tie: the first", []gate.LayerDecision{ld("A", wouldAsk), ld("B", wouldAsk), ld("N", allow)}, gate.Allow, "A", "", "i1", "wa"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := gate.Combine(tc.in)
			if d.Verdict != tc.verdict || d.Layer != tc.layer || d.Rule != tc.rule || d.IncidentID != tc.incident {
				t.Fatalf("got %+v", d)
			}
			if (d.Would == nil) != (tc.wouldRule == "") || d.Would != nil && d.Would.Rule != tc.wouldRule {
				t.Fatalf("would %+v, want rule %q", d.Would, tc.wouldRule)
			}
			if len(d.Layers) != len(tc.in) {
				t.Fatalf("layers %+v", d.Layers)
			}
			for i, l := range d.Layers {
				in := tc.in[i]
				if l.Layer != in.Layer || l.Verdict != in.Decision.Verdict || l.Rule != in.Decision.Rule || l.SnapshotDigest != in.Decision.SnapshotDigest || !reflect.DeepEqual(l.Would, in.Decision.Would) {
					t.Fatalf("layers[%d] = %+v for %+v", i, l, in)
				}
			}
		})
	}
	d := gate.Combine(nil)
	if d.Verdict != gate.Block || d.Code != gate.CodeNoPolicy || d.Message != gate.RefusalPrefix+"no policy selects this pod" || d.IncidentID == "" {
		t.Fatalf("no layer: %+v", d)
	}
}

func TestNoLayerSelectsThePod(t *testing.T) {
	s := clusterSnap(t, "web-only", gate.PolicyMeta{})
	idx, _ := mustIndex(t, gate.LayersIndex{Namespace: "team-a", Layers: []gate.Layer{layerOf(s, 0, gate.Requirement{Key: "app", Operator: gate.OperatorIn, Values: []string{"web"}})}})
	set, err := gate.NewLayerSet(idx, nil, nil, map[string]string{"app": "db"})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Layers()) != 0 {
		t.Fatalf("layers %q", set.Layers())
	}
	d := set.CompileFor("Bash", "").Decide(bashLs)
	if d.Verdict != gate.Block || d.Code != gate.CodeNoPolicy {
		t.Fatalf("%+v", d)
	}
	if d, ok := set.CompileFor("Bash", "").DecideWithoutCEL(bashLs); !ok || d.Code != gate.CodeNoPolicy {
		t.Fatalf("without CEL: %+v %v", d, ok)
	}
	// A selected layer whose snapshot is not given is a fault, not a layer left out.
	if _, err := gate.NewLayerSet(idx, nil, nil, map[string]string{"app": "web"}); err == nil || snapErrCode(t, err) != gate.CodeSnapshotMissing {
		t.Fatalf("missing layer snapshot: %v", err)
	}
}

func TestNonLayeredDecisionsSerialiseAsBefore(t *testing.T) {
	p, _ := gate.Compile(nsSnap(t, gate.PolicyMeta{}))
	b, err := json.Marshal(p.Decide(bashLs))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`"layer`)) {
		t.Fatalf("a decision of one policy carries layer fields: %s", b)
	}
}
