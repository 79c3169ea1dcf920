package gate_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
)

// TestRecordInputSnapshot: a policy's opt-in to recorded input is part of its snapshot (the
// digest covers it, a loaded snapshot has it back) and rides on each of its decisions; a
// snapshot whose opt-in lists no mask, or a pointer that is not one, does not load.
func TestRecordInputSnapshot(t *testing.T) {
	masks := &gate.InputRecording{Erase: []string{"/content"}, Hash: []string{"/command"}}
	rules := []gate.Rule{{Name: "r", Tools: []string{"Bash"}, Action: gate.Allow}}
	with, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/p", RecordInput: masks}, rules)
	if err != nil {
		t.Fatal(err)
	}
	without, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/p"}, rules)
	if err != nil {
		t.Fatal(err)
	}
	if with.Digest == without.Digest {
		t.Fatal("the digest does not cover recordInput")
	}
	data, err := with.Encode()
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New("")
	if err := g.Load(data); err != nil {
		t.Fatal(err)
	}
	if d := g.Decide(&gate.Call{Tool: "Bash", Input: map[string]any{"command": "ls"}}); !reflect.DeepEqual(d.RecordInput, masks) {
		t.Fatalf("decision carries %+v, want %+v", d.RecordInput, masks)
	}
	for _, bad := range []*gate.InputRecording{{}, {Erase: []string{"content"}}, {Hash: []string{"/a~2"}}} {
		if _, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/p", RecordInput: bad}, rules); err == nil || !strings.Contains(err.Error(), "recordInput") {
			t.Errorf("recordInput %+v: %v", bad, err)
		}
	}
}

// TestLayeredRecordInput: a layered call records input when any layer opts in, with the masks of
// every layer that does: a namespace policy's opt-in never drops the baseline's masks, and a
// pointer one layer erases and another hashes is erased.
func TestLayeredRecordInput(t *testing.T) {
	allow := gate.Rule{Name: "r", Tools: []string{"Bash"}, Action: gate.Allow}
	base := clusterSnap(t, "baseline", gate.PolicyMeta{RecordInput: &gate.InputRecording{Erase: []string{"/env", "/command"}}}, allow)
	quiet := clusterSnap(t, "quiet", gate.PolicyMeta{}, allow)
	idx, _ := mustIndex(t, gate.LayersIndex{Namespace: "agents", Namespaced: true, Layers: []gate.Layer{layerOf(base, 10), layerOf(quiet, 20)}})
	decide := func(primary *gate.InputRecording) *gate.InputRecording {
		t.Helper()
		p, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/p", RecordInput: primary}, []gate.Rule{allow})
		if err != nil {
			t.Fatal(err)
		}
		set, err := gate.NewLayerSet(idx, p, map[string]*gate.Snapshot{"baseline": base, "quiet": quiet}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return set.Compile().Decide(&gate.Call{Tool: "Bash", Input: map[string]any{"command": "ls"}}).RecordInput
	}
	if got, want := decide(nil), (&gate.InputRecording{Erase: []string{"/command", "/env"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("baseline alone: %+v, want %+v", got, want)
	}
	got := decide(&gate.InputRecording{Hash: []string{"/command", "/cwd"}})
	if want := (&gate.InputRecording{Erase: []string{"/command", "/env"}, Hash: []string{"/cwd"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("both: %+v, want %+v", got, want)
	}
	quietIdx, _ := mustIndex(t, gate.LayersIndex{Namespace: "agents", Namespaced: true, Layers: []gate.Layer{layerOf(quiet, 20)}})
	p, _ := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/p"}, []gate.Rule{allow})
	set, err := gate.NewLayerSet(quietIdx, p, map[string]*gate.Snapshot{"quiet": quiet}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := set.Compile().Decide(&gate.Call{Tool: "Bash", Input: map[string]any{"command": "ls"}}); d.RecordInput != nil {
		t.Errorf("no layer opts in, yet %+v", d.RecordInput)
	}
}
