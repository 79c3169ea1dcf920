package bootstrap

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/golden"
)

// baselineLayers are two cluster layers as a baseline carries them: "marker" blocks a command
// for every pod; "untrusted" asks before curl for the pods labelled tier=untrusted, and sets
// the posture floor.
func baselineLayers(t *testing.T) []ClusterLayer {
	t.Helper()
	marker := clusterPolicy("marker", 20, gatev1.Rule{Name: "no-marker", Tools: []string{"bash"}, When: `input.command.contains("fleet-marker")`, Action: gatev1.ActionBlock, Reason: "the platform forbids the marker", Code: "marker"})
	untrusted := clusterPolicy("untrusted", 5, gatev1.Rule{Name: "curl-asks", Tools: []string{"bash"}, When: `input.command.startsWith("curl")`, Action: gatev1.ActionAsk, Reason: "curl needs a human"})
	untrusted.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"tier": "untrusted"}}
	untrusted.Spec.PermissionMode = gatev1.PermissionModeAllowReads
	return []ClusterLayer{mustLayer(t, marker, ""), mustLayer(t, untrusted, "")}
}

// writeBundle writes a bundle's files into a directory as the pod's volume has them, with the
// pod's name and labels (downward API form) beside them, and returns the directory.
func writeBundle(t *testing.T, data map[string]string, labels map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	var podLabels strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(&podLabels, "%s=%q\n", k, labels[k])
	}
	files := maps.Clone(data)
	files[gate.PodNameFile] = "agent-0"
	files[gate.PodLabelsFile] = podLabels.String()
	for name, v := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// hookDecision decides a Bash command as the hook of a pod with these labels does with the
// bundle mounted: gate.LoadLayered on the volume, then the layers' combined decision.
func hookDecision(t *testing.T, data map[string]string, labels map[string]string, command string) gate.Decision {
	t.Helper()
	set, err := gate.LoadLayered(writeBundle(t, data, labels), "")
	if err != nil {
		t.Fatalf("the gate does not load the bundle: %v", err)
	}
	input, err := gate.RenderInput(map[string]any{"command": command})
	if err != nil {
		t.Fatal(err)
	}
	return set.Compile().Decide(&gate.Call{Tool: "Bash", Input: input, Surface: gate.SurfaceHook, Caller: set.Caller})
}

// TestRenderBaselineGolden: the baseline bundle has the keys of a layered namespace policy's
// bundle, with an empty namespace snapshot the index says is not there (namespaced false,
// workspace ""), a wrapper that runs gate-hook with --layers, the layers' posture floor, and
// the harness network policy of its ceiling; it verifies against its bootstrap hash.
func TestRenderBaselineGolden(t *testing.T) {
	ceiling := &gatev1.EgressSpec{AllowedHosts: []gatev1.Hostname{"api.anthropic.com"}, AllowedCIDRs: []gatev1.CIDR{"203.0.113.0/24"}, DeniedCIDRs: []gatev1.CIDR{"203.0.113.128/25"}}
	b, err := RenderBaseline(Layers{Cluster: baselineLayers(t)}, "team-a", []*gatev1.EgressSpec{ceiling}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{KeyHookScript, KeyHarnessSettings, KeyHarnessNetworkPolicy, gate.LayersFileName} {
		golden.Check(t, filepath.Join("baseline", k), []byte(b.Data[k]))
	}
	want := []string{KeySnapshot, KeyHookScript, KeyManagedSettings, KeySettings, KeyHarnessSettings, KeyHarnessNetworkPolicy, KeyCodexRequirements, KeyCodexManagedConfig, KeyGeminiSettings, KeyBootstrapHash, gate.LayersFileName,
		gate.ClusterLayerFile("marker"), gate.ClusterLayerCheckedFile("marker"), gate.ClusterLayerFile("untrusted"), gate.ClusterLayerCheckedFile("untrusted")}
	if got := slices.Sorted(maps.Keys(b.Data)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("keys %v, want %v", got, slices.Sorted(slices.Values(want)))
	}
	if v, ok := b.Data[KeySnapshot]; !ok || v != "" {
		t.Errorf("%s must be present and empty, is present=%t %q", KeySnapshot, ok, v)
	}
	if !strings.Contains(b.Data[KeyHookScript], " --layers") {
		t.Error("the baseline's wrapper does not pass --layers")
	}
	idx, err := gate.LoadLayersIndex([]byte(b.Data[gate.LayersFileName]), "")
	if err != nil {
		t.Fatal(err)
	}
	if idx.Namespaced || idx.WorkspaceID != "" || idx.Namespace != "team-a" || len(idx.Layers) != 2 || idx.Layers[0].Name != "untrusted" {
		t.Errorf("the index: namespaced %t, workspace %q, namespace %q, layers %+v", idx.Namespaced, idx.WorkspaceID, idx.Namespace, idx.Layers)
	}
	if !Verify(b.Data, "", Options{}) || !OnlyBundleKeys(b.Data) || b.Data[KeyBootstrapHash] != b.Hash {
		t.Error("the baseline bundle does not verify against its bootstrap hash")
	}
	edited := maps.Clone(b.Data)
	edited[gate.ClusterLayerFile("marker")] = b.Data[gate.ClusterLayerFile("untrusted")]
	if Verify(edited, "", Options{}) {
		t.Error("the bootstrap hash does not cover a layer")
	}
}

// TestBaselineDecides: the gate loads the baseline from the pod's volume and decides with the
// cluster layers alone: a layer's Block decides a call, a layer whose pod selector the pod's
// labels match applies to it only then, a call no layer refuses is allowed, a pod no layer
// selects is refused (no_policy), and an exception of a layer lifts exactly its rule.
func TestBaselineDecides(t *testing.T) {
	layers := baselineLayers(t)
	b, err := RenderBaseline(Layers{Cluster: layers}, "team-a", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	untrusted := map[string]string{"tier": "untrusted"}
	for _, c := range []struct {
		name    string
		labels  map[string]string
		command string
		verdict gate.Verdict
		layer   string
		code    string
	}{
		{"a cluster Block", nil, "echo fleet-marker", gate.Block, "ClusterHarnessAgentPolicy/marker", "marker"},
		{"a call no layer refuses", untrusted, "echo hello", gate.Allow, "", ""},
		{"the selected pod's layer", untrusted, "curl https://example.com", gate.Ask, "ClusterHarnessAgentPolicy/untrusted", ""},
		{"a pod the layer does not select", map[string]string{"tier": "trusted"}, "curl https://example.com", gate.Allow, "", ""},
	} {
		d := hookDecision(t, b.Data, c.labels, c.command)
		if d.Verdict != c.verdict || (c.layer != "" && d.Layer != c.layer) || d.Code != c.code {
			t.Errorf("%s: %s by %s code %q (%s), want %s by %s code %q", c.name, d.Verdict, d.Layer, d.Code, d.Reason, c.verdict, c.layer, c.code)
		}
	}

	// Only a layer that selects by label: a pod without the label has no policy at all.
	only, err := RenderBaseline(Layers{Cluster: layers[1:]}, "team-a", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := hookDecision(t, only.Data, map[string]string{"tier": "trusted"}, "echo hello"); d.Verdict != gate.Block || d.Code != gate.CodeNoPolicy {
		t.Errorf("a pod no layer selects: %s %s (%s), want Block %s", d.Verdict, d.Code, d.Reason, gate.CodeNoPolicy)
	}

	// An exception of the marker layer lifts its rule for every pod of the namespace.
	lifted := slices.Clone(layers)
	lifted[0].Exceptions = []gate.Exception{{Name: "incident-7", Rules: []string{"no-marker"}, ExpiresAt: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}
	withException, err := RenderBaseline(Layers{Cluster: lifted}, "team-a", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := hookDecision(t, withException.Data, nil, "echo fleet-marker"); d.Verdict != gate.Allow || !slices.Contains(d.Exceptions, "incident-7") {
		t.Errorf("the excepted rule: %s by %s, exceptions %v", d.Verdict, d.Layer, d.Exceptions)
	}
}

// TestBaselinePosture: with no layer asking for more, a baseline's harness settings are a
// namespace policy's defaults (allow-edits, bash filtered); a layer's floor tightens them.
func TestBaselinePosture(t *testing.T) {
	plain := mustLayer(t, clusterPolicy("plain", 10), "")
	reads := mustLayer(t, clusterPolicy("reads", 10), "")
	reads.PermissionMode = gatev1.PermissionModeAllowReads
	for _, c := range []struct {
		name   string
		layers []ClusterLayer
		want   string
	}{
		{"defaults", []ClusterLayer{plain}, `"permissionMode": "allow-edits"`},
		{"a floor", []ClusterLayer{plain, reads}, `"permissionMode": "allow-reads"`},
	} {
		b, err := RenderBaseline(Layers{Cluster: c.layers}, "team-a", nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s := b.Data[KeyHarnessSettings]; !strings.Contains(s, c.want) || !strings.Contains(s, `"bash"`) {
			t.Errorf("%s: harness settings %s, want %s and bash filtered", c.name, s, c.want)
		}
		if np := b.Data[KeyHarnessNetworkPolicy]; !strings.Contains(np, `"deny-all"`) {
			t.Errorf("%s: with no ceiling the harness network policy is %s, want deny-all", c.name, np)
		}
	}
}

// TestBaselineHarnessEgress: the harness network policy allows what every ceiling allows.
func TestBaselineHarnessEgress(t *testing.T) {
	spec := func(hosts []gatev1.Hostname, cidrs []gatev1.CIDR, denied ...gatev1.CIDR) *gatev1.EgressSpec {
		return &gatev1.EgressSpec{AllowedHosts: hosts, AllowedCIDRs: cidrs, DeniedCIDRs: denied}
	}
	for _, c := range []struct {
		name     string
		ceilings []*gatev1.EgressSpec
		want     *gatev1.EgressSpec
	}{
		{"no ceiling denies all", nil, nil},
		{"one ceiling is itself", []*gatev1.EgressSpec{spec([]gatev1.Hostname{"a.example"}, []gatev1.CIDR{"10.1.0.0/16"}, "10.1.2.0/24")},
			spec([]gatev1.Hostname{"a.example"}, []gatev1.CIDR{"10.1.0.0/16"}, "10.1.2.0/24")},
		{"a ceiling of nothing denies all", []*gatev1.EgressSpec{spec([]gatev1.Hostname{"a.example"}, nil), spec(nil, nil)}, nil},
		{"hosts both list, the narrower CIDR, every denied range",
			[]*gatev1.EgressSpec{
				spec([]gatev1.Hostname{"a.example", "b.example"}, []gatev1.CIDR{"10.0.0.0/8", "192.0.2.0/24"}, "10.9.0.0/16"),
				spec([]gatev1.Hostname{"b.example", "c.example"}, []gatev1.CIDR{"10.1.0.0/16", "198.51.100.0/24"}, "10.1.2.0/24"),
			},
			spec([]gatev1.Hostname{"b.example"}, []gatev1.CIDR{"10.1.0.0/16"}, "10.9.0.0/16", "10.1.2.0/24")},
		{"nothing in common denies all",
			[]*gatev1.EgressSpec{spec([]gatev1.Hostname{"a.example"}, nil), spec(nil, []gatev1.CIDR{"192.0.2.0/24"})}, nil},
	} {
		got := BaselineHarnessEgress(c.ceilings)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestBaselineTooLarge: layers that do not fit in one ConfigMap are a *TooLargeError naming
// them, and the bundle published instead blocks every call.
func TestBaselineTooLarge(t *testing.T) {
	var layers []ClusterLayer
	for i := range 4 {
		c := clusterPolicy(fmt.Sprintf("big-%d", i), 10)
		for j := range 40 {
			c.Spec.Rules = append(c.Spec.Rules, gatev1.Rule{Name: fmt.Sprintf("r%d", j), Tools: []string{"bash"},
				When: fmt.Sprintf(`input.command.contains(%q)`, strings.Repeat(fmt.Sprint(j), 2000)), Action: gatev1.ActionBlock, Reason: strings.Repeat("x", 1000)})
		}
		layers = append(layers, mustLayer(t, c, ""))
	}
	_, err := RenderBaseline(Layers{Cluster: layers}, "team-a", nil, Options{})
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Layers != 4 || tooLarge.Size <= MaxBundleBytes {
		t.Fatalf("want a TooLargeError naming 4 layers, got %v", err)
	}
	// One of them fits.
	fits, err := RenderBaseline(Layers{Cluster: layers[:1]}, "team-a", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if size := configMapSize(fits.Data); size > MaxBundleBytes {
		t.Fatalf("a bundle that fits is %d bytes", size)
	}

	b, err := RenderBaselineBlocking("team-a", tooLarge.Error(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !Verify(b.Data, "", Options{}) || strings.Contains(b.Data[KeyHookScript], "--layers") {
		t.Fatal("the blocking baseline does not verify, or its wrapper asks for layers it does not have")
	}
	snap, err := gate.LoadSnapshot([]byte(b.Data[KeySnapshot]), "")
	if err != nil || snap.Invalid == "" || !strings.Contains(snap.Invalid, "cluster layers") {
		t.Fatalf("the blocking baseline's snapshot: %v %+v", err, snap)
	}
	p, _ := gate.Compile(snap)
	input, _ := gate.RenderInput(map[string]any{"command": "echo hello"})
	if d := p.Decide(&gate.Call{Tool: "Bash", Input: input, Surface: gate.SurfaceHook}); d.Verdict != gate.Block || d.Code != gate.CodePolicyInvalid {
		t.Errorf("a call under the blocking baseline: %s %s", d.Verdict, d.Code)
	}
}
