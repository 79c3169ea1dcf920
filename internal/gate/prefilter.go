package gate

import (
	"cmp"
	"slices"
	"strings"
)

// Prefilters: a cheap, partial evaluation of a rule's `when`, run before CEL. It understands
// only string predicates on a variable or a top-level input field (==, !=, contains,
// startsWith, endsWith, matches), and of the call's view what is known without parsing a shell
// command (callview_known.go: call.kind and call.cwd, call.shellKnown, and a comprehension over
// one of its lists that is false when the list is empty, as exists is), combined with &&, ||
// and !. Where CEL is linked, it also reads the view CEL reads, built once per decision:
// call.shellKnown of a command line, and an exists' body element by element
// (prefilter_elements.go). Each node answers true, false or
// unknown; a rule is skipped only when its whole `when` is definitely false. Anything the
// prefilter cannot be sure of (an absent field, a non-string value, an unsupported form) is
// unknown, and CEL decides, so errors and failurePolicy behave exactly as without it. CEL's
// && and || are commutative over errors (false && error is false), which is what makes a
// definitely-false conjunct enough to skip.

type tri uint8

const (
	unknown tri = iota
	isFalse
	isTrue
)

type quick func(a *activation) tri

// Prefilter ops that several files build or read.
const (
	opNot  = "not"
	opTrue = "true"
)

// Prefilter is the serializable form of a rule's prefilter, carried in the snapshot so a
// one-shot caller (gate-hook) can rule a rule out without decoding or planning its CEL.
// It is derived from the type-checked expression when the snapshot is built, and covered by
// the digest. Ops: and, or, not (args); eq, ne, contains, startsWith, endsWith (ref, value);
// containsAll (ref, values: literals a regex requires); exists (false when the list call.<field>
// is empty, or no element satisfies the element prefilter in args: prefilter_elements.go, where
// var "element" and op isUnder are); true (the boolean call.<field>); opaque (a part it does not
// understand).
type Prefilter struct {
	Op     string      `json:"op"`
	Args   []Prefilter `json:"args,omitempty"`
	Var    string      `json:"var,omitempty"`
	Field  string      `json:"field,omitempty"`
	Value  string      `json:"value,omitempty"`
	Values []string    `json:"values,omitempty"`
}

// compile turns a prefilter into its evaluator. A prefilter it does not understand (from a
// newer controller, say) compiles to nil, and CEL decides.
func (p *Prefilter) compile() quick {
	switch p.Op {
	case "opaque":
		return func(*activation) tri { return unknown }
	case "and", "or":
		return p.compileJunction()
	case opNot:
		return p.compileNot()
	case "exists":
		return p.compileExists()
	case opTrue:
		return p.compileTrue()
	}
	return p.compilePredicate()
}

// compileExists compiles a comprehension over a list of the call's view that is false when the
// list is empty: false when the view's list is known to be empty, unknown otherwise; an exists
// with an element prefilter in args also when no element satisfies it (compileElements).
func (p *Prefilter) compileExists() quick {
	if p.Var != varCall || !viewListField(p.Field) {
		return nil
	}
	if q := p.compileElements(); q != nil {
		return q
	}
	field := p.Field
	return func(a *activation) tri {
		if viewListEmpty(a.tool, a.input, field) {
			return isFalse
		}
		return unknown
	}
}

// compileTrue compiles a boolean field of the call's view, call.shellKnown: known without
// parsing, or from the view the activation builds (parsedShellKnown).
func (p *Prefilter) compileTrue() quick {
	if p.Var != varCall || p.Field != "shellKnown" {
		return nil
	}
	return func(a *activation) tri {
		if known, ok := viewShellKnown(a.tool, a.input); ok {
			return boolTri(known)
		}
		if known, ok := a.parsedShellKnown(); ok {
			return boolTri(known)
		}
		return unknown
	}
}

func (p *Prefilter) compileJunction() quick {
	if len(p.Args) == 0 {
		return nil
	}
	// The parts that may build the call's view (parse its command line) go last, so a cheaper
	// part decides first when it can; the answer does not depend on the order.
	args := slices.Clone(p.Args)
	slices.SortStableFunc(args, func(x, y Prefilter) int { return cmp.Compare(x.buildsView(), y.buildsView()) })
	qs := make([]quick, len(args))
	for i := range args {
		if qs[i] = args[i].compile(); qs[i] == nil {
			return nil
		}
	}
	if p.Op == "and" {
		return decidedBy(qs, isFalse)
	}
	return decidedBy(qs, isTrue)
}

// buildsView is 1 for a prefilter that may build the call's view to answer, 0 otherwise.
func (p *Prefilter) buildsView() int {
	switch {
	case p.Op == "exists" && len(p.Args) > 0, p.Op == opTrue && p.Var == varCall:
		return 1
	}
	for i := range p.Args {
		if p.Args[i].buildsView() == 1 {
			return 1
		}
	}
	return 0
}

// decidedBy is the three-valued and (decisive isFalse) or or (decisive isTrue) of qs, for
// prefilters of a call and of an element alike: decisive when any of qs is, the other answer
// when all are the other, unknown otherwise.
func decidedBy[Q ~func(A) tri, A any](qs []Q, decisive tri) Q {
	other := isTrue
	if decisive == isTrue {
		other = isFalse
	}
	return func(a A) tri {
		all := true
		for _, q := range qs {
			switch q(a) {
			case decisive:
				return decisive
			case unknown:
				all = false
			}
		}
		if all {
			return other
		}
		return unknown
	}
}

// negated is the three-valued not of q.
func negated[Q ~func(A) tri, A any](q Q) Q {
	return func(a A) tri {
		switch q(a) {
		case isTrue:
			return isFalse
		case isFalse:
			return isTrue
		}
		return unknown
	}
}

func (p *Prefilter) compileNot() quick {
	if len(p.Args) != 1 {
		return nil
	}
	q := p.Args[0].compile()
	if q == nil {
		return nil
	}
	return negated(q)
}

// compilePredicate compiles a test of one string (eq, ne, contains, startsWith, endsWith,
// containsAll); the answer is unknown when the string is absent.
func (p *Prefilter) compilePredicate() quick {
	ref := p.accessor()
	if ref == nil {
		return nil
	}
	pred := p.predicate()
	if pred == nil {
		return nil
	}
	return func(a *activation) tri {
		s, ok := ref(a)
		if !ok {
			return unknown
		}
		return pred(s)
	}
}

// predicate is the test a predicate op makes of its string, or nil for an op it does not know.
func (p *Prefilter) predicate() func(string) tri {
	arg := p.Value
	switch p.Op {
	case "eq":
		return func(s string) tri { return boolTri(s == arg) }
	case "ne":
		return func(s string) tri { return boolTri(s != arg) }
	case "contains":
		return func(s string) tri { return boolTri(strings.Contains(s, arg)) }
	case "startsWith":
		return func(s string) tri { return boolTri(strings.HasPrefix(s, arg)) }
	case "endsWith":
		return func(s string) tri { return boolTri(strings.HasSuffix(s, arg)) }
	case "containsAll":
		if len(p.Values) == 0 {
			return nil
		}
		lits := p.Values
		// A missing literal means no match; all present means only that a match is possible.
		return func(s string) tri {
			for _, l := range lits {
				if !strings.Contains(s, l) {
					return isFalse
				}
			}
			return unknown
		}
	}
	return nil
}

func boolTri(b bool) tri {
	if b {
		return isTrue
	}
	return isFalse
}

// accessor reads the string the prefilter tests; it reports false when the value is absent
// or not a string, which leaves the answer to CEL.
func (p *Prefilter) accessor() func(*activation) (string, bool) {
	switch p.Var {
	case varTool:
		return func(a *activation) (string, bool) { return a.tool, true }
	case varServer:
		return func(a *activation) (string, bool) { return a.server, true }
	case varSurface:
		return func(a *activation) (string, bool) { return a.surface, true }
	case varSession:
		return func(a *activation) (string, bool) { return a.session, true }
	case varCall:
		switch p.Field {
		case "kind":
			return func(a *activation) (string, bool) { return viewKind(a.tool), true }
		case "cwd":
			return func(a *activation) (string, bool) { return a.cwd, true }
		}
		return nil
	case varInput:
		name := p.Field
		return func(a *activation) (string, bool) {
			s, ok := a.input[name].(string)
			return s, ok
		}
	}
	return nil
}
