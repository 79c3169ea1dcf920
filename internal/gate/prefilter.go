// Over 300 lines: one recursive analysis of CEL's AST (derive, bound, compile); split, it would scatter.

package gate

import (
	"encoding/json"
	"regexp/syntax"
	"strings"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
)

// Prefilters: a cheap, partial evaluation of a rule's `when`, run before CEL. It understands
// only string predicates on a variable or a top-level input field (==, !=, contains,
// startsWith, endsWith, matches) combined with &&, || and !. Each node answers true, false or
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

// Prefilter is the serializable form of a rule's prefilter, carried in the snapshot so a
// one-shot caller (gate-hook) can rule a rule out without decoding or planning its CEL.
// It is derived from the type-checked expression when the snapshot is built, and covered by
// the digest. Ops: and, or, not (args); eq, ne, contains, startsWith, endsWith (ref, value);
// containsAll (ref, values: literals a regex requires); opaque (a part it does not understand).
type Prefilter struct {
	Op     string      `json:"op"`
	Args   []Prefilter `json:"args,omitempty"`
	Var    string      `json:"var,omitempty"`
	Field  string      `json:"field,omitempty"`
	Value  string      `json:"value,omitempty"`
	Values []string    `json:"values,omitempty"`
}

var opaque = Prefilter{Op: "opaque"}

// prefilterOf derives the prefilter of a checked expression, or nil when it has no part the
// prefilter understands.
func prefilterOf(e ast.Expr) *Prefilter {
	if e.Kind() != ast.CallKind {
		return nil
	}
	call := e.AsCall()
	args := call.Args()
	switch fn := call.FunctionName(); fn {
	case "_&&_":
		return junctionPrefilter("and", args)
	case "_||_":
		return junctionPrefilter("or", args)
	case "!_":
		if p := prefilterOf(args[0]); p != nil {
			return &Prefilter{Op: "not", Args: []Prefilter{*p}}
		}
	case "_==_":
		return comparisonPrefilter("eq", args)
	case "_!=_":
		return comparisonPrefilter("ne", args)
	case "contains", "startsWith", "endsWith", "matches":
		return stringFunctionPrefilter(call)
	}
	return nil
}

// junctionPrefilter derives the prefilter of a && (op "and") or || (op "or") call.
func junctionPrefilter(op string, args []ast.Expr) *Prefilter {
	// CEL parses a && b && c as a balanced or left-nested tree; the prefilter is n-ary
	// (both operators are associative in its three-valued logic), so children of the same
	// operator are spliced in, and opaque conjuncts collapse into one: the encoding stays
	// linear in the expression instead of nesting once per operand.
	var kids []Prefilter
	sawOpaque := false
	for _, a := range args {
		p := prefilterOf(a)
		switch {
		case p == nil && op == "or":
			return nil // an opaque disjunct can always be true
		case p == nil:
			sawOpaque = true
		case p.Op == op:
			for _, k := range p.Args {
				if k.Op == "opaque" {
					sawOpaque = true
				} else {
					kids = append(kids, k)
				}
			}
		default:
			kids = append(kids, *p)
		}
	}
	if len(kids) == 0 {
		return nil
	}
	if sawOpaque {
		kids = append(kids, opaque)
	}
	return &Prefilter{Op: op, Args: kids}
}

// comparisonPrefilter derives the prefilter of an == (op "eq") or != (op "ne") call between a
// string reference and a string literal, in either order.
func comparisonPrefilter(op string, args []ast.Expr) *Prefilter {
	ref, lit := stringRef(args[0]), stringLiteral(args[1])
	if ref == nil {
		ref, lit = stringRef(args[1]), stringLiteral(args[0])
	}
	if ref == nil || lit == nil {
		return nil
	}
	p := *ref
	p.Op, p.Value = op, *lit
	return &p
}

// stringFunctionPrefilter derives the prefilter of a string reference's contains, startsWith,
// endsWith or matches call with a literal argument; a regex becomes the literals it requires.
func stringFunctionPrefilter(call ast.CallExpr) *Prefilter {
	args := call.Args()
	if !call.IsMemberFunction() || len(args) != 1 {
		return nil
	}
	ref, lit := stringRef(call.Target()), stringLiteral(args[0])
	if ref == nil || lit == nil {
		return nil
	}
	p := *ref
	if fn := call.FunctionName(); fn != "matches" {
		p.Op, p.Value = fn, *lit
		return &p
	}
	if p.Values = requiredLiterals(*lit); len(p.Values) == 0 {
		return nil
	}
	p.Op = "containsAll"
	return &p
}

// boundedPrefilter drops a prefilter whose encoding would be larger than maxPrefilterSize of
// the expression it stands for: it is only a shortcut (CEL decides without it), and the
// snapshot must fit in a ConfigMap however the rules are written.
func boundedPrefilter(p *Prefilter, when string) *Prefilter {
	if p == nil {
		return nil
	}
	b, err := json.Marshal(p)
	if err != nil || len(b) > maxPrefilterSize(len(when)) {
		return nil
	}
	return p
}

// maxPrefilterSize bounds a prefilter's JSON by the length of its expression: twice the text
// (each predicate's literal and field name appear once, with the op's keys around them) and a
// little room for the smallest expressions.
func maxPrefilterSize(whenLen int) int { return 2*whenLen + 128 }

// compile turns a prefilter into its evaluator. A prefilter it does not understand (from a
// newer controller, say) compiles to nil, and CEL decides.
func (p *Prefilter) compile() quick {
	switch p.Op {
	case "opaque":
		return func(*activation) tri { return unknown }
	case "and", "or":
		return p.compileJunction()
	case "not":
		return p.compileNot()
	}
	return p.compilePredicate()
}

func (p *Prefilter) compileJunction() quick {
	if len(p.Args) == 0 {
		return nil
	}
	qs := make([]quick, len(p.Args))
	for i := range p.Args {
		if qs[i] = p.Args[i].compile(); qs[i] == nil {
			return nil
		}
	}
	if p.Op == "and" {
		return andOf(qs)
	}
	return orOf(qs)
}

// andOf is false when any of qs is false, true when all are true, and unknown otherwise.
func andOf(qs []quick) quick {
	return func(a *activation) tri {
		all := true
		for _, q := range qs {
			switch q(a) {
			case isFalse:
				return isFalse
			case unknown:
				all = false
			}
		}
		if all {
			return isTrue
		}
		return unknown
	}
}

// orOf is true when any of qs is true, false when all are false, and unknown otherwise.
func orOf(qs []quick) quick {
	return func(a *activation) tri {
		all := true
		for _, q := range qs {
			switch q(a) {
			case isTrue:
				return isTrue
			case unknown:
				all = false
			}
		}
		if all {
			return isFalse
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
	return func(a *activation) tri {
		switch q(a) {
		case isTrue:
			return isFalse
		case isFalse:
			return isTrue
		}
		return unknown
	}
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
	case varInput:
		name := p.Field
		return func(a *activation) (string, bool) {
			s, ok := a.input[name].(string)
			return s, ok
		}
	}
	return nil
}

// stringRef recognises a string variable (tool, server, surface, session) or a top-level
// input field (input.f or input["f"]).
func stringRef(e ast.Expr) *Prefilter {
	switch e.Kind() {
	case ast.IdentKind:
		switch v := e.AsIdent(); v {
		case varTool, varServer, varSurface, varSession:
			return &Prefilter{Var: v}
		}
	case ast.SelectKind:
		sel := e.AsSelect()
		if sel.IsTestOnly() || sel.Operand().Kind() != ast.IdentKind || sel.Operand().AsIdent() != varInput {
			return nil
		}
		return &Prefilter{Var: varInput, Field: sel.FieldName()}
	case ast.CallKind:
		call := e.AsCall()
		if call.FunctionName() != "_[_]" || len(call.Args()) != 2 {
			return nil
		}
		target, key := call.Args()[0], stringLiteral(call.Args()[1])
		if target.Kind() != ast.IdentKind || target.AsIdent() != varInput || key == nil {
			return nil
		}
		return &Prefilter{Var: varInput, Field: *key}
	}
	return nil
}

func stringLiteral(e ast.Expr) *string {
	if e.Kind() != ast.LiteralKind {
		return nil
	}
	s, ok := e.AsLiteral().(types.String)
	if !ok {
		return nil
	}
	str := string(s)
	return &str
}

// requiredLiterals returns case-sensitive substrings that every string matched by the RE2
// pattern contains, as CEL's matches (an unanchored search) sees it.
func requiredLiterals(pattern string) []string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	var out []string
	var walk func(*syntax.Regexp)
	walk = func(re *syntax.Regexp) {
		switch re.Op {
		case syntax.OpLiteral:
			if re.Flags&syntax.FoldCase == 0 && len(re.Rune) > 0 {
				out = append(out, string(re.Rune))
			}
		case syntax.OpConcat:
			for _, sub := range re.Sub {
				walk(sub)
			}
		case syntax.OpCapture, syntax.OpPlus:
			walk(re.Sub[0])
		case syntax.OpRepeat:
			if re.Min >= 1 {
				walk(re.Sub[0])
			}
		}
	}
	walk(re.Simplify())
	return out
}
