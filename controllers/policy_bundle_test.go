package controllers

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/intutic/gate-operator/internal/bootstrap"
)

// TestBundleMemo: a published result holds for its policy's generation whatever the bundle in
// force, a held-back one only for the same bundle in force; dropData keeps the hash of a
// published result and nothing else; forget drops the policy.
func TestBundleMemo(t *testing.T) {
	name := types.NamespacedName{Namespace: "agents", Name: "memo"}
	key := buildKey{uid: "uid-1", generation: 3, digest: "d1", hash: "h1", configMapVersion: "7"}
	published := bootstrap.Result{Bundle: bootstrap.Bundle{Data: map[string]string{"a": "1"}, Hash: "sha256:1"}}
	heldBack := bootstrap.Result{Bundle: bootstrap.Bundle{Data: map[string]string{"a": "0"}, Hash: "sha256:0"}, RenderErr: errors.New("too large")}

	otherConfigMap := key
	otherConfigMap.configMapVersion = "8"
	nextGeneration := key
	nextGeneration.generation = 4
	recreated := key
	recreated.uid = "uid-2"
	cases := []struct {
		name   string
		stored bootstrap.Result
		lookup buildKey
		found  bool
	}{
		{"published, same key", published, key, true},
		{"published, the ConfigMap changed", published, otherConfigMap, true},
		{"published, a new generation", published, nextGeneration, false},
		{"published, the policy recreated", published, recreated, false},
		{"held back, same key", heldBack, key, true},
		{"held back, the ConfigMap changed", heldBack, otherConfigMap, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var m bundleMemo
			m.store(name, key, tc.stored)
			got, ok := m.lookup(name, tc.lookup)
			if ok != tc.found {
				t.Fatalf("lookup found %v, want %v", ok, tc.found)
			}
			if ok && got.Bundle.Hash != tc.stored.Bundle.Hash {
				t.Fatalf("lookup returned bundle %s, want %s", got.Bundle.Hash, tc.stored.Bundle.Hash)
			}
		})
	}

	var m bundleMemo
	m.store(name, key, published)
	m.dropData(name, bootstrap.Result{Bundle: bootstrap.Bundle{Data: map[string]string{"a": "2"}, Hash: "sha256:2"}})
	if got, _ := m.lookup(name, key); got.Bundle.Data == nil {
		t.Fatal("dropData of another bundle dropped the memoised one's data")
	}
	m.dropData(name, published)
	if got, ok := m.lookup(name, key); !ok || got.Bundle.Data != nil || got.Bundle.Hash != published.Bundle.Hash {
		t.Fatalf("after dropData: found %v, data %v, hash %s; want the hash alone", ok, got.Bundle.Data, got.Bundle.Hash)
	}

	m.store(name, key, heldBack)
	m.dropData(name, heldBack)
	if got, _ := m.lookup(name, key); got.Bundle.Data == nil {
		t.Fatal("dropData dropped the data of a held-back result")
	}

	m.forget(name)
	if _, ok := m.lookup(name, key); ok {
		t.Fatal("lookup found a policy after forget")
	}
}
