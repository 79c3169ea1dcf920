//go:build !nocel

package gate

import (
	"encoding/json"
	"regexp/syntax"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
)

// Deriving a rule's prefilter from its type-checked expression, when the snapshot is built
// (prefilter.go has what a prefilter is and how it is evaluated).

var opaque = Prefilter{Op: "opaque"}

// prefilterOf derives the prefilter of a checked expression, or nil when it has no part the
// prefilter understands.
func prefilterOf(e ast.Expr) *Prefilter {
	switch e.Kind() {
	case ast.ComprehensionKind:
		return comprehensionPrefilter(e.AsComprehension())
	case ast.SelectKind:
		if f := viewField(e); f == "shellKnown" {
			return &Prefilter{Op: opTrue, Var: varCall, Field: f}
		}
		return nil
	case ast.CallKind:
	default:
		return nil
	}
	call := e.AsCall()
	args := call.Args()
	switch fn := call.FunctionName(); fn {
	case "_&&_":
		return junction("and", args, prefilterOf)
	case "_||_":
		return junction("or", args, prefilterOf)
	case "!_":
		if p := prefilterOf(args[0]); p != nil {
			return &Prefilter{Op: opNot, Args: []Prefilter{*p}}
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

// comprehensionPrefilter derives the prefilter of a comprehension over a list of the call's
// view that is false when the list is empty: its result is its accumulator, which starts false
// (exists is one). Over no element the loop never runs, so it is false whatever its body says.
// When it is an exists (its step is `accu || body`), the body's element prefilter is its arg
// (prefilter_elements.go).
// (Its range is evaluated where the comprehension stands, never inside another comprehension,
// which prefilterOf does not enter: `call` there is the call's view.)
func comprehensionPrefilter(c ast.ComprehensionExpr) *Prefilter {
	field := viewField(c.IterRange())
	if !viewListField(field) || c.HasIterVar2() {
		return nil
	}
	init, result := c.AccuInit(), c.Result()
	if init.Kind() != ast.LiteralKind || init.AsLiteral() != types.False ||
		result.Kind() != ast.IdentKind || result.AsIdent() != c.AccuVar() {
		return nil
	}
	p := &Prefilter{Op: "exists", Var: varCall, Field: field}
	if body := elementPrefilter(c, field); body != nil {
		p.Args = []Prefilter{*body}
	}
	return p
}

// viewField is the field f of call.f, or "".
func viewField(e ast.Expr) string {
	if e.Kind() != ast.SelectKind {
		return ""
	}
	sel := e.AsSelect()
	if sel.IsTestOnly() || sel.Operand().Kind() != ast.IdentKind || sel.Operand().AsIdent() != varCall {
		return ""
	}
	return sel.FieldName()
}

// junction derives the prefilter of a && (op "and") or || (op "or") call, its operands' with
// derive.
func junction(op string, args []ast.Expr, derive func(ast.Expr) *Prefilter) *Prefilter {
	// CEL parses a && b && c as a balanced or left-nested tree; the prefilter is n-ary
	// (both operators are associative in its three-valued logic), so children of the same
	// operator are spliced in, and opaque conjuncts collapse into one: the encoding stays
	// linear in the expression instead of nesting once per operand.
	var kids []Prefilter
	sawOpaque := false
	for _, a := range args {
		p := derive(a)
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
	if fits(p, when) {
		return p
	}
	// Without the bodies of its exists, which are the first to go.
	if q := withoutElements(*p); fits(&q, when) {
		return &q
	}
	return nil
}

func fits(p *Prefilter, when string) bool {
	b, err := json.Marshal(p)
	return err == nil && len(b) <= maxPrefilterSize(len(when))
}

// maxPrefilterSize bounds a prefilter's JSON by the length of its expression: twice the text
// (each predicate's literal and field name appear once, with the op's keys around them) and a
// little room for the smallest expressions.
func maxPrefilterSize(whenLen int) int { return 2*whenLen + 128 }

// stringRef recognises a string variable (tool, server, surface, session), a top-level input
// field (input.f or input["f"]), or the view's call.kind or call.cwd.
func stringRef(e ast.Expr) *Prefilter {
	switch e.Kind() {
	case ast.IdentKind:
		switch v := e.AsIdent(); v {
		case varTool, varServer, varSurface, varSession:
			return &Prefilter{Var: v}
		}
	case ast.SelectKind:
		if f := viewField(e); f == "kind" || f == "cwd" {
			return &Prefilter{Var: varCall, Field: f}
		}
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
