package bootstrap

import (
	"bytes"
	"maps"
	"testing"
)

// TestCheckedRulesInBundle: Build publishes the checked rules file of a policy whose rules have
// a when, the bootstrap hash covers it (edited or removed, the bundle no longer verifies), a
// kept bundle carries it over, a bundle rendered without it hashes as before it existed, and
// a bundle it would not fit in leaves it out rather than failing.
func TestCheckedRulesInBundle(t *testing.T) {
	p := samplePolicy(t)
	p.Generation = 1
	res, err := Build(p, Published{}, Options{})
	if err != nil || res.HeldBack() {
		t.Fatalf("build: %v %v %v", err, res.CompileErrs, res.RenderErr)
	}
	data := res.Bundle.Data
	if data[KeyCheckedRules] == "" {
		t.Fatalf("the sample's bundle has no %s", KeyCheckedRules)
	}
	if !Verify(data, p.Spec.WorkspaceID, Options{}) {
		t.Fatal("the bundle does not verify")
	}
	edited, missing := maps.Clone(data), maps.Clone(data)
	edited[KeyCheckedRules] += " "
	delete(missing, KeyCheckedRules)
	if Verify(edited, p.Spec.WorkspaceID, Options{}) || Verify(missing, p.Spec.WorkspaceID, Options{}) {
		t.Error("a bundle whose checked rules were edited or removed verified")
	}

	kept, err := Keep(data, p.Spec.WorkspaceID, Layers{}, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if kept.Data[KeyCheckedRules] != data[KeyCheckedRules] || kept.Hash != res.Bundle.Hash {
		t.Error("a kept bundle did not carry the checked rules over")
	}

	plain, err := Render(&p.Spec, []byte(data[KeySnapshot]), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.Data[KeyCheckedRules]; ok || plain.Hash == res.Bundle.Hash || !Verify(plain.Data, p.Spec.WorkspaceID, Options{}) {
		t.Error("a bundle rendered without checked rules carries them, or hashes as one with them")
	}

	// A snapshot that leaves less room than the checked rules need.
	big := append([]byte(data[KeySnapshot]), bytes.Repeat([]byte(" "), MaxBundleBytes-configMapSize(data)+len(data[KeyCheckedRules])/2)...)
	b, err := RenderChecked(&p.Spec, big, []byte(data[KeyCheckedRules]), Options{})
	if err != nil {
		t.Fatalf("a bundle that fits without its checked rules was refused: %v", err)
	}
	if _, ok := b.Data[KeyCheckedRules]; ok || configMapSize(b.Data) > MaxBundleBytes || !Verify(b.Data, p.Spec.WorkspaceID, Options{}) {
		t.Error("the checked rules were not left out of a bundle they do not fit in")
	}
}
