package gate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestLiteralSetFindsEveryLiteral compares the automaton with strings.Contains on random
// literals and strings over a small alphabet, where literals overlap and nest.
func TestLiteralSetFindsEveryLiteral(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abc-/"[r.IntN(5)]
		}
		return string(b)
	}
	for range 300 {
		var lits []string
		var ids []int32
		for i := range 1 + r.IntN(12) {
			lits = append(lits, word(1+r.IntN(4)))
			ids = append(ids, int32(i))
		}
		m := newLiteralSet(lits, ids)
		for range 20 {
			s := word(r.IntN(30))
			got := make([]uint64, 1)
			m.scan(s, got)
			for i, l := range lits {
				if want := strings.Contains(s, l); hasBit(got, ids[i]) != want {
					t.Fatalf("literals %q in %q: %q reported %v, want %v", lits, s, l, !want, want)
				}
			}
		}
	}
	// A set with every byte value falls back to strings.Contains, with the same answers.
	var all []string
	var ids []int32
	for c := range 256 {
		all = append(all, string([]byte{byte(c), 'x'}))
		ids = append(ids, int32(c))
	}
	m := newLiteralSet(all, ids)
	got := make([]uint64, 4)
	m.scan("ax\x00x", got)
	var found []int32
	for _, id := range ids {
		if hasBit(got, id) {
			found = append(found, id)
		}
	}
	if !slices.Equal(found, []int32{0, 'a'}) {
		t.Fatalf("found %v", found)
	}
}

func BenchmarkLiteralSetScan(b *testing.B) {
	var lits []string
	var ids []int32
	for i := range 25 {
		lits = append(lits, fmt.Sprintf("tool%d", i*4))
		ids = append(ids, int32(i))
	}
	lits, ids = append(lits, "--force"), append(ids, 25)
	m := newLiteralSet(lits, ids)
	set := make([]uint64, 1)
	s := "go test ./... -run TestDecide -count=1"
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		m.scan(s, set)
	}
}
