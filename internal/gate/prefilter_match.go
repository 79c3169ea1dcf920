package gate

import "strings"

// literalSet tells which of many literals occur in a string, in one pass over it: an
// Aho-Corasick automaton made deterministic over byte classes, so a scan costs two table
// loads per byte however many literals there are, and never allocates. The one kept library
// with such a matcher (github.com/coregx/ahocorasick) returns its matches in a slice allocated
// per call, which the decision path cannot afford; presence is all the prefilters need.
//
// A set too large for a table (maxMatchTable entries) tests each literal with strings.Contains
// instead: the same answer, more slowly.
type literalSet struct {
	lits  []string
	ids   []int32 // ids[i] is the bit set when lits[i] occurs
	class [256]uint8
	width int // byte classes: the distinct bytes of the literals, and one for every other byte
	// rootStays[b] is set when b leaves the root state where it is, without a hit; single[b]
	// when b is a literal; pairs has bit a<<8|b set when some literal starts with a, b.
	rootStays [256]bool
	single    [256]bool
	pairs     [1024]uint64
	next      []uint32 // next[state*width+class] is the next state, with hitFlag when it has hits
	hits      [][]int32
}

const (
	hitFlag = uint32(1) << 31
	// maxMatchTable bounds the transition table of one set (16 MiB of uint32).
	maxMatchTable = 4 << 20
)

// trieNode is a node of the trie newLiteralSet builds its automaton from.
type trieNode struct {
	edges map[byte]int32
	fail  int32
	hits  []int32
}

// newLiteralSet builds the set; ids[i] is what scan reports for lits[i]. Literals must not be
// empty (an empty literal occurs in every string: the caller knows that without scanning).
func newLiteralSet(lits []string, ids []int32) *literalSet {
	m := &literalSet{lits: lits, ids: ids}
	trie, seen := buildTrie(lits, ids)
	size := len(trie)
	distinct := 0
	for _, s := range seen {
		if s {
			distinct++
		}
	}
	if distinct == 256 || size*(distinct+1) > maxMatchTable {
		return m // every byte value is in a literal, or the table is too large: scan naively
	}
	m.width = 1
	for c := range 256 {
		if seen[c] {
			m.class[c] = uint8(m.width)
			m.width++
		}
	}
	// Failure links breadth first; a state's hits include those of its failure state, so a
	// scan reports every literal ending at a position, overlapping ones too.
	m.next = make([]uint32, size*m.width)
	queue := make([]int32, 0, size)
	for c := range 256 {
		if n, ok := trie[0].edges[byte(c)]; ok {
			trie[n].fail = 0
			queue = append(queue, n)
			m.next[int(m.class[c])] = uint32(n)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		trie[s].hits = append(trie[s].hits, trie[trie[s].fail].hits...)
		for c := range 256 {
			if !seen[c] {
				continue
			}
			cl := int(m.class[c])
			if n, ok := trie[s].edges[byte(c)]; ok {
				trie[n].fail = int32(m.next[int(trie[s].fail)*m.width+cl] &^ hitFlag)
				queue = append(queue, n)
				m.next[int(s)*m.width+cl] = uint32(n)
			} else {
				m.next[int(s)*m.width+cl] = m.next[int(trie[s].fail)*m.width+cl] &^ hitFlag
			}
		}
	}
	for c := range 256 {
		m.rootStays[c] = m.next[int(m.class[c])] == 0
	}
	for _, l := range lits {
		if len(l) == 1 {
			m.single[l[0]] = true
		} else {
			m.pairs[int(l[0])<<2|int(l[1])>>6] |= 1 << (l[1] & 63)
		}
	}
	m.hits = make([][]int32, size)
	for s := range trie {
		m.hits[s] = trie[s].hits
	}
	// Store each transition as the next state's row (state * width), so a scan does not
	// multiply, and mark those into a state with hits, so a scan looks them up only then.
	for i, n := range m.next {
		m.next[i] = n * uint32(m.width)
		if len(m.hits[n]) > 0 {
			m.next[i] |= hitFlag
		}
	}
	return m
}

// scan sets bit id in set for each literal that occurs in s.
func (m *literalSet) scan(s string, set []uint64) {
	if m.next == nil {
		for i, l := range m.lits {
			if strings.Contains(s, l) {
				setBit(set, m.ids[i])
			}
		}
		return
	}
	next, class, stay := m.next, &m.class, &m.rootStays
	row := uint32(0) // the current state's row: state * width
	for i := 0; i < len(s); i++ {
		if row == 0 {
			// At the root, skip the positions where no literal starts: where the byte starts
			// none, or it and the next start no literal longer than one byte and the byte is no
			// literal of its own. These are independent loads, which the processor overlaps,
			// where the automaton's are a chain; and the automaton is entered only where a
			// literal's first two bytes are.
			for i < len(s) && (stay[s[i]] || i+1 < len(s) && !m.single[s[i]] && m.pairs[int(s[i])<<2|int(s[i+1])>>6]&(1<<(s[i+1]&63)) == 0) {
				i++
			}
			if i == len(s) {
				return
			}
		}
		n := next[row+uint32(class[s[i]])]
		row = n &^ hitFlag
		if n&hitFlag != 0 {
			for _, id := range m.hits[row/uint32(m.width)] {
				setBit(set, id)
			}
		}
	}
}

func setBit(set []uint64, i int32)      { set[i>>6] |= 1 << (uint(i) & 63) }
func hasBit(set []uint64, i int32) bool { return set[i>>6]&(1<<(uint(i)&63)) != 0 }

// buildTrie returns the trie of the literals, on raw bytes, and the bytes they use.
func buildTrie(lits []string, ids []int32) ([]trieNode, *[256]bool) {
	trie := []trieNode{{edges: map[byte]int32{}}}
	seen := new([256]bool)
	for i, l := range lits {
		s := int32(0)
		for j := 0; j < len(l); j++ {
			c := l[j]
			seen[c] = true
			n, ok := trie[s].edges[c]
			if !ok {
				n = int32(len(trie))
				trie = append(trie, trieNode{edges: map[byte]int32{}})
				trie[s].edges[c] = n
			}
			s = n
		}
		trie[s].hits = append(trie[s].hits, ids[i])
	}
	return trie, seen
}
