package gate

import (
	"math/bits"
	"strings"
)

// The screen runs the prefilters of every candidate rule of a call at once. A rule's prefilter
// is mostly a conjunction of tests of input fields (a literal the command contains, a prefix of
// the path); each such test, when false (or, under a !, when true), is enough to rule the rule
// out. The screen gathers these tests from all rules into atoms, one per distinct (field, test,
// literal), so a decision fetches each field once, finds all of a field's literals in one pass
// (literalSet), and rules out every candidate whose atoms say so with a few word operations.
//
// A rule the screen does not rule out goes on to its own prefilter (Prefilter.compile), then to
// CEL, as before: the screen only ever rules out a rule whose prefilter is definitely false,
// which its own evaluation would also say. Tests of other variables (tool, surface...) and
// disjunctions are left to that evaluation.

type atomKind uint8

const (
	atomContains atomKind = iota
	atomPrefix
	atomSuffix
	atomEqual
)

// atomTest rules a rule out when its field is a string and the atom's truth is ruledOutIf.
type atomTest struct {
	field      int // index into screen.fields
	atom       int32
	ruledOutIf bool
}

// screen is the atoms of a policy's rules and, per rule, the tests that rule it out.
type screen struct {
	fields []fieldScreen
	atoms  int
	tests  [][]atomTest // by rule index; nil when the screen knows nothing of a rule
}

// fieldScreen evaluates the atoms of one input field.
type fieldScreen struct {
	name     string
	lo, hi   int32       // its atoms are numbered [lo, hi)
	contains *literalSet // nil when no atom of the field is a contains
	always   []int32     // atoms true of every string: an empty contains, prefix or suffix
	prefix   anchored
	suffix   anchored
	equal    anchored
}

// anchored atoms are compared at one end of the string; first holds the bytes they start (or
// for suffixes end) with, so a string that starts with none of them is not compared at all.
type anchored struct {
	first [4]uint64
	lits  []string
	ids   []int32
}

func (a *anchored) add(lit string, id int32, end byte) {
	a.first[end>>6] |= 1 << (end & 63)
	a.lits = append(a.lits, lit)
	a.ids = append(a.ids, id)
}

func (a *anchored) might(b byte) bool { return a.first[b>>6]&(1<<(b&63)) != 0 }

// atomKey is one atom: a test of a field with a literal.
type atomKey struct {
	field string
	kind  atomKind
	lit   string
}

// foundTest is a test newScreen found in a rule's prefilter.
type foundTest struct {
	rule int
	key  atomKey
	out  bool
}

// newScreen gathers the atoms of the rules' prefilters. Only rules that compiled, have a
// when, and whose prefilter compiled are screened.
func newScreen(rules []compiledRule) *screen {
	var found []foundTest
	var order []string // fields in order of first use
	seenField := map[string]bool{}
	for i := range rules {
		r := &rules[i]
		if r.err != nil || r.program == nil || r.filter == nil || r.Prefilter == nil {
			continue
		}
		r.Prefilter.rejections(func(field string, kind atomKind, lit string, ruledOutIf bool) {
			if !seenField[field] {
				seenField[field] = true
				order = append(order, field)
			}
			found = append(found, foundTest{i, atomKey{field, kind, lit}, ruledOutIf})
		})
	}
	sc := &screen{tests: make([][]atomTest, len(rules))}
	if len(found) == 0 {
		return sc
	}
	// Number the atoms field by field, so each field's atoms are contiguous.
	ids := map[atomKey]int32{}
	for slot, f := range order {
		sc.fields = append(sc.fields, sc.numberField(f, found, ids))
		for _, p := range found {
			if p.key.field == f {
				sc.tests[p.rule] = append(sc.tests[p.rule], atomTest{field: slot, atom: ids[p.key], ruledOutIf: p.out})
			}
		}
	}
	return sc
}

// numberField numbers the atoms of one field, next after those numbered so far, and returns
// the screen that evaluates them.
func (sc *screen) numberField(field string, found []foundTest, ids map[atomKey]int32) fieldScreen {
	fs := fieldScreen{name: field, lo: int32(sc.atoms)}
	var containsLits []string
	var containsIDs []int32
	for _, p := range found {
		if p.key.field != field {
			continue
		}
		if _, ok := ids[p.key]; ok {
			continue
		}
		id := int32(sc.atoms)
		sc.atoms++
		ids[p.key] = id
		switch lit := p.key.lit; {
		case lit == "" && p.key.kind != atomEqual:
			fs.always = append(fs.always, id)
		case p.key.kind == atomContains:
			containsLits = append(containsLits, lit)
			containsIDs = append(containsIDs, id)
		case p.key.kind == atomPrefix:
			fs.prefix.add(lit, id, lit[0])
		case p.key.kind == atomSuffix:
			fs.suffix.add(lit, id, lit[len(lit)-1])
		default:
			var b byte
			if lit != "" {
				b = lit[0]
			}
			fs.equal.add(lit, id, b)
		}
	}
	fs.hi = int32(sc.atoms)
	if len(containsLits) > 0 {
		fs.contains = newLiteralSet(containsLits, containsIDs)
	}
	return fs
}

// rejections reports the atoms whose truth alone makes the prefilter definitely false: the
// string tests of input fields among its conjuncts (a leaf, or the children of a top-level
// and), a test under ! with the opposite truth. A regex's required literals are each such a
// test. Anything else (or, opaque parts, other variables) yields nothing.
func (p *Prefilter) rejections(add func(field string, kind atomKind, lit string, ruledOutIf bool)) {
	switch p.Op {
	case "and":
		for i := range p.Args {
			p.Args[i].rejections(add)
		}
	case opNot:
		if len(p.Args) == 1 {
			p.Args[0].leafRejections(true, add)
		}
	default:
		p.leafRejections(false, add)
	}
}

// leafRejections is rejections of a string test of an input field, negated when under !: the
// atom that rules the prefilter out is the test itself holding when negated, failing otherwise.
// containsAll is only a conjunction of tests when not negated.
func (p *Prefilter) leafRejections(negated bool, add func(field string, kind atomKind, lit string, ruledOutIf bool)) {
	if p.Var != varInput {
		return
	}
	switch p.Op {
	case "eq":
		add(p.Field, atomEqual, p.Value, negated)
	case "ne":
		add(p.Field, atomEqual, p.Value, !negated)
	case "contains":
		add(p.Field, atomContains, p.Value, negated)
	case "startsWith":
		add(p.Field, atomPrefix, p.Value, negated)
	case "endsWith":
		add(p.Field, atomSuffix, p.Value, negated)
	case "containsAll":
		if !negated {
			for _, v := range p.Values {
				add(p.Field, atomContains, v, false)
			}
		}
	}
}

// eval sets the bits of the field's atoms that hold of s.
func (f *fieldScreen) eval(s string, holds []uint64) {
	for _, id := range f.always {
		setBit(holds, id)
	}
	if f.contains != nil {
		f.contains.scan(s, holds)
	}
	if len(s) == 0 {
		for i, l := range f.equal.lits {
			if l == "" {
				setBit(holds, f.equal.ids[i])
			}
		}
		return
	}
	if f.prefix.might(s[0]) {
		for i, l := range f.prefix.lits {
			if strings.HasPrefix(s, l) {
				setBit(holds, f.prefix.ids[i])
			}
		}
	}
	if f.suffix.might(s[len(s)-1]) {
		for i, l := range f.suffix.lits {
			if strings.HasSuffix(s, l) {
				setBit(holds, f.suffix.ids[i])
			}
		}
	}
	if f.equal.might(s[0]) {
		for i, l := range f.equal.lits {
			if s == l {
				setBit(holds, f.equal.ids[i])
			}
		}
	}
}

// toolScreen is the screen of one candidate list (positions in it, not rule indexes). A
// candidate with "must" tests (ruledOutIf false) is ruled out unless all of them hold, so the
// common case, a string in which few literals occur, costs one word operation per field: every
// candidate with a must test on the field is ruled out, except those whose must atoms all
// turned up, found from the atoms that hold. A "must not" test (ruledOutIf true) rules its
// candidate out when its atom holds.
type toolScreen struct {
	words  int
	fields []toolField
	// byAtom maps a policy atom to its entry in atoms, -1 when no candidate tests it.
	byAtom []int32
	atoms  []toolAtom
	// must lists, per candidate position, the must tests it has (atoms of any field).
	must [][]atomTest
}

type toolField struct {
	field  int
	lo, hi int32    // the field's atoms are [lo, hi)
	mustOn []uint64 // candidates with a must test on the field
}

type toolAtom struct {
	mustOf  []int    // candidate positions with a must test on the atom
	ifTrue  []uint64 // candidates a must-not test on the atom rules out
	anyTrue bool
}

// forCandidates builds the toolScreen of a candidate list; nil when it rules nothing out.
func (sc *screen) forCandidates(candidates []int) *toolScreen {
	if sc == nil || sc.atoms == 0 {
		return nil
	}
	ts := &toolScreen{words: (len(candidates) + 63) / 64, byAtom: make([]int32, sc.atoms), must: make([][]atomTest, len(candidates))}
	for i := range ts.byAtom {
		ts.byAtom[i] = -1
	}
	fieldAt := map[int]int{}
	for pos, i := range candidates {
		for _, t := range sc.tests[i] {
			k := ts.byAtom[t.atom]
			if k < 0 {
				k = int32(len(ts.atoms))
				ts.byAtom[t.atom] = k
				ts.atoms = append(ts.atoms, toolAtom{ifTrue: make([]uint64, ts.words)})
			}
			f, ok := fieldAt[t.field]
			if !ok {
				f = len(ts.fields)
				fieldAt[t.field] = f
				fs := &sc.fields[t.field]
				ts.fields = append(ts.fields, toolField{field: t.field, lo: fs.lo, hi: fs.hi, mustOn: make([]uint64, ts.words)})
			}
			a := &ts.atoms[k]
			if t.ruledOutIf {
				a.ifTrue[pos/64] |= 1 << (pos % 64)
				a.anyTrue = true
				continue
			}
			a.mustOf = append(a.mustOf, pos)
			ts.must[pos] = append(ts.must[pos], t)
			ts.fields[f].mustOn[pos/64] |= 1 << (pos % 64)
		}
	}
	if len(ts.atoms) == 0 {
		return nil
	}
	return ts
}

// screenScratch is what one decision's screen writes. It lives on the decision's stack, with
// room for the screens of most policies (2048 atoms, 512 candidates of one tool, 16 fields);
// a larger screen allocates. (Arrays and lengths, not slices of its own arrays: a struct that
// points into itself escapes to the heap.)
type screenScratch struct {
	nFields, nHolds, nWords int
	fieldBuf                [16]bool
	holdBuf                 [32]uint64
	outBuf, spareBuf        [8]uint64
	big                     *bigScratch
}

type bigScratch struct {
	fieldOK               []bool
	holds, out, spareBits []uint64
}

// size sets the lengths of the scratch for a screen.
func (s *screenScratch) size(fields, holds, words int) {
	s.nFields, s.nHolds, s.nWords = fields, holds, words
	if fields > len(s.fieldBuf) || holds > len(s.holdBuf) || words > len(s.outBuf) {
		s.big = &bigScratch{fieldOK: make([]bool, fields), holds: make([]uint64, holds), out: make([]uint64, words), spareBits: make([]uint64, words)}
	}
}

func (s *screenScratch) fieldOK() []bool {
	if s.big != nil {
		return s.big.fieldOK
	}
	return s.fieldBuf[:s.nFields]
}

func (s *screenScratch) holds() []uint64 {
	if s.big != nil {
		return s.big.holds
	}
	return s.holdBuf[:s.nHolds]
}

// ruledOut has bit pos set when candidate pos is ruled out; empty when nothing was screened.
func (s *screenScratch) ruledOut() []uint64 {
	if s.big != nil {
		return s.big.out
	}
	return s.outBuf[:s.nWords]
}

func (s *screenScratch) spared() []uint64 {
	if s.big != nil {
		return s.big.spareBits
	}
	return s.spareBuf[:s.nWords]
}

// run screens a call's input: it marks in s the candidates of ts that the atoms rule out.
func (ts *toolScreen) run(sc *screen, input map[string]any, s *screenScratch) {
	s.size(len(sc.fields), (sc.atoms+63)/64, ts.words)
	fieldOK, holds, out, spared := s.fieldOK(), s.holds(), s.ruledOut(), s.spared()
	for fi := range ts.fields {
		f := &ts.fields[fi]
		fs := &sc.fields[f.field]
		v, ok := input[fs.name].(string)
		fieldOK[f.field] = ok
		if !ok {
			continue // the field's tests are unknown: they rule nothing out
		}
		for w := f.lo / 64; w <= (f.hi-1)/64; w++ {
			holds[w] = 0
		}
		fs.eval(v, holds)
		clear(spared)
		for w := f.lo / 64; w <= (f.hi-1)/64; w++ {
			word := holds[w]
			for word != 0 {
				atom := w*64 + int32(bits.TrailingZeros64(word))
				word &= word - 1
				if atom < f.lo || atom >= f.hi || ts.byAtom[atom] < 0 {
					continue
				}
				a := &ts.atoms[ts.byAtom[atom]]
				if a.anyTrue {
					for i := range out {
						out[i] |= a.ifTrue[i]
					}
				}
				for _, pos := range a.mustOf {
					if ts.allHold(pos, f.field, holds) {
						spared[pos/64] |= 1 << (pos % 64)
					}
				}
			}
		}
		for i := range out {
			out[i] |= f.mustOn[i] &^ spared[i]
		}
	}
}

// allHold reports whether every must test of the candidate at pos on field holds.
func (ts *toolScreen) allHold(pos, field int, holds []uint64) bool {
	for _, t := range ts.must[pos] {
		if t.field == field && !hasBit(holds, t.atom) {
			return false
		}
	}
	return true
}

// ruled reports whether the screen ruled out the candidate at position pos.
func (s *screenScratch) ruled(pos int) bool {
	out := s.ruledOut()
	return pos/64 < len(out) && out[pos/64]&(1<<(pos%64)) != 0
}
