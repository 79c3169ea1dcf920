//go:build !nocel

package gate

import (
	"slices"

	"cel.dev/cel-go/common/ast"

	"github.com/intutic/gate-operator/internal/shellparse"
)

// Element prefilters: the body of an exists over one of the view's lists, evaluated natively on
// each element of the view the activation builds (the one CEL reads), so that an exists no
// element satisfies is ruled out without CEL. `call.writes.exists(p, !p.isUnder("/workspace"))`
// is {"op":"exists","args":[{"op":"not","args":[{"op":"isUnder","var":"element","value":
// "/workspace"}]}],"var":"call","field":"writes"}.
//
// An element prefilter tests the element itself (a string of reads, writes, urls or hosts) or a
// field of a command (name, exe and cwd with the string ops, known with true), with the
// prefilter's string ops, isUnder (value: shellparse.IsUnder, as CEL's isUnder) and in (values:
// `x in ["a", "b"]`). An exists is false when every element's body is definitely false, and
// unknown otherwise. A hook that does not know element prefilters ignores an exists' args and
// reads it as before (false when the list is empty), which stays sound.

// varElement is the element of an exists, in an element prefilter.
const varElement = "element"

// elementPrefilter derives the element prefilter of an exists' body, the loop step
// `accu || body` of a comprehension over iterVar; nil when the step is not of that form or the
// body has no part it understands. field is the list the comprehension ranges over.
func elementPrefilter(c ast.ComprehensionExpr, field string) *Prefilter {
	step := c.LoopStep()
	if step.Kind() != ast.CallKind || step.AsCall().FunctionName() != "_||_" {
		return nil
	}
	args := step.AsCall().Args()
	if len(args) != 2 || args[0].Kind() != ast.IdentKind || args[0].AsIdent() != c.AccuVar() {
		return nil
	}
	d := elementDeriver{iterVar: c.IterVar(), commands: field == viewCommands}
	return d.derive(args[1])
}

// elementDeriver derives element prefilters for the element named iterVar, a command when
// commands is set and a string otherwise. It recognises only that name and literals, so names
// of the enclosing expression (call, input) never reach it, and it never enters a nested
// comprehension, which could bind iterVar to something else.
type elementDeriver struct {
	iterVar  string
	commands bool
}

func (d elementDeriver) derive(e ast.Expr) *Prefilter {
	if e.Kind() == ast.SelectKind {
		if f := d.field(e); f == "known" {
			return &Prefilter{Op: opTrue, Var: varElement, Field: f}
		}
		return nil
	}
	if e.Kind() != ast.CallKind {
		return nil
	}
	call := e.AsCall()
	args := call.Args()
	switch fn := call.FunctionName(); fn {
	case "_&&_":
		return junction("and", args, d.derive)
	case "_||_":
		return junction("or", args, d.derive)
	case "!_":
		if p := d.derive(args[0]); p != nil {
			return &Prefilter{Op: opNot, Args: []Prefilter{*p}}
		}
	case "_==_", "_!=_":
		ref, lit := d.stringRef(args[0]), stringLiteral(args[1])
		if ref == nil {
			ref, lit = d.stringRef(args[1]), stringLiteral(args[0])
		}
		if ref == nil || lit == nil {
			return nil
		}
		ref.Op, ref.Value = map[string]string{"_==_": "eq", "_!=_": "ne"}[fn], *lit
		return ref
	case "@in":
		return d.in(args)
	case "contains", "startsWith", "endsWith", "matches", "isUnder":
		if !call.IsMemberFunction() || len(args) != 1 {
			return nil
		}
		ref, lit := d.stringRef(call.Target()), stringLiteral(args[0])
		if ref == nil || lit == nil {
			return nil
		}
		if fn != "matches" {
			ref.Op, ref.Value = fn, *lit
			return ref
		}
		if ref.Values = requiredLiterals(*lit); len(ref.Values) == 0 {
			return nil
		}
		ref.Op = "containsAll"
		return ref
	}
	return nil
}

// in derives `x in ["a", "b"]`, a list of string literals, as the op in with those values.
func (d elementDeriver) in(args []ast.Expr) *Prefilter {
	if len(args) != 2 || args[1].Kind() != ast.ListKind {
		return nil
	}
	ref := d.stringRef(args[0])
	list := args[1].AsList()
	if ref == nil || list.Size() == 0 || len(list.OptionalIndices()) > 0 {
		return nil
	}
	ref.Op = "in"
	for _, el := range list.Elements() {
		lit := stringLiteral(el)
		if lit == nil {
			return nil
		}
		ref.Values = append(ref.Values, *lit)
	}
	return ref
}

// stringRef recognises the element as a string: the element of a list of strings, or the name,
// exe or cwd of a command.
func (d elementDeriver) stringRef(e ast.Expr) *Prefilter {
	if !d.commands {
		if e.Kind() == ast.IdentKind && e.AsIdent() == d.iterVar {
			return &Prefilter{Var: varElement}
		}
		return nil
	}
	switch f := d.field(e); f {
	case "name", "exe", "cwd":
		return &Prefilter{Var: varElement, Field: f}
	}
	return nil
}

// field is f of a command's c.f, or "".
func (d elementDeriver) field(e ast.Expr) string {
	if !d.commands || e.Kind() != ast.SelectKind {
		return ""
	}
	sel := e.AsSelect()
	if sel.IsTestOnly() || sel.Operand().Kind() != ast.IdentKind || sel.Operand().AsIdent() != d.iterVar {
		return ""
	}
	return sel.FieldName()
}

// withoutElements is p with the element prefilters of its exists removed, for when they would
// make it too large to carry.
func withoutElements(p Prefilter) Prefilter {
	if p.Op == "exists" {
		p.Args = nil
		return p
	}
	if len(p.Args) > 0 {
		args := make([]Prefilter, len(p.Args))
		for i := range p.Args {
			args[i] = withoutElements(p.Args[i])
		}
		p.Args = args
	}
	return p
}

// element is one element of a list of the view: a string, or a command.
type element struct {
	s   string
	cmd *shellparse.Command
}

// elementQuick is an element prefilter's evaluator.
type elementQuick func(e element) tri

// compileElements compiles an exists with an element prefilter: false when the view's list is
// empty or no element can satisfy the body, unknown otherwise. nil when the body does not
// compile (an op it does not know), and the exists is read without it.
func (p *Prefilter) compileElements() quick {
	if len(p.Args) != 1 {
		return nil
	}
	commands := p.Field == viewCommands
	body := p.Args[0].compileElement(commands)
	if body == nil {
		return nil
	}
	field := p.Field
	return func(a *activation) tri {
		if viewListEmpty(a.tool, a.input, field) {
			return isFalse // known without building the view
		}
		v := a.viewOfCall()
		var e element
		if commands {
			for i := range v.Commands {
				e.cmd = &v.Commands[i]
				if body(e) != isFalse {
					return unknown
				}
			}
			return isFalse
		}
		for _, s := range viewStrings(v, field) {
			e.s = s
			if body(e) != isFalse {
				return unknown
			}
		}
		return isFalse
	}
}

// viewStrings is a list of strings of the view.
func viewStrings(v *CallView, field string) []string {
	switch field {
	case "reads":
		return v.Reads
	case "writes":
		return v.Writes
	case "urls":
		return v.URLs
	case "hosts":
		return v.Hosts
	}
	return nil
}

// compileElement compiles an element prefilter of a list of commands (commands) or of strings;
// nil for a part it does not know.
func (p *Prefilter) compileElement(commands bool) elementQuick {
	switch p.Op {
	case "opaque":
		return func(element) tri { return unknown }
	case "and", "or", opNot:
		return p.compileElementLogic(commands)
	case opTrue:
		if p.Var != varElement || !commands || p.Field != "known" {
			return nil
		}
		return func(e element) tri { return boolTri(e.cmd.Known) }
	}
	if p.Var != varElement {
		return nil
	}
	get := elementString(p.Field, commands)
	if get == nil {
		return nil
	}
	var pred func(string) tri
	switch p.Op {
	case "isUnder":
		dir := p.Value
		pred = func(s string) tri { return boolTri(shellparse.IsUnder(s, dir)) }
	case "in":
		values := p.Values
		pred = func(s string) tri { return boolTri(slices.Contains(values, s)) }
	default:
		if pred = p.predicate(); pred == nil {
			return nil
		}
	}
	return func(e element) tri { return pred(get(e)) }
}

// compileElementLogic compiles the and, or and not of element prefilters, in the three-valued
// logic of the call's prefilters (decidedBy, negated).
func (p *Prefilter) compileElementLogic(commands bool) elementQuick {
	if len(p.Args) == 0 || (p.Op == opNot && len(p.Args) != 1) {
		return nil
	}
	qs := make([]elementQuick, len(p.Args))
	for i := range p.Args {
		if qs[i] = p.Args[i].compileElement(commands); qs[i] == nil {
			return nil
		}
	}
	switch p.Op {
	case opNot:
		return negated(qs[0])
	case "or":
		return decidedBy(qs, isTrue)
	}
	return decidedBy(qs, isFalse)
}

// elementString reads the string an element prefilter tests: the element of a list of strings
// (no field), or a command's name, exe or cwd.
func elementString(field string, commands bool) func(element) string {
	switch {
	case !commands && field == "":
		return func(e element) string { return e.s }
	case !commands:
		return nil
	case field == "name":
		return func(e element) string { return e.cmd.Name }
	case field == "exe":
		return func(e element) string { return e.cmd.Exe }
	case field == "cwd":
		return func(e element) string { return e.cmd.Cwd }
	}
	return nil
}

// parsedShellKnown is call.shellKnown of the view the activation builds, which parses the call's
// command line (once per decision, for CEL too).
func (a *activation) parsedShellKnown() (known, ok bool) {
	return a.viewOfCall().ShellKnown, true
}
