package gate

import (
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

// buildQuick returns the prefilter of e, or nil when e has no part the prefilter understands.
func buildQuick(e ast.Expr) quick {
	if e.Kind() != ast.CallKind {
		return nil
	}
	call := e.AsCall()
	args := call.Args()
	switch call.FunctionName() {
	case "_&&_", "_||_":
		qs := make([]quick, 0, len(args))
		for _, a := range args {
			if q := buildQuick(a); q != nil {
				qs = append(qs, q)
			}
		}
		if call.FunctionName() == "_&&_" {
			if len(qs) == 0 {
				return nil
			}
			known := len(qs) == len(args)
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
				if all && known {
					return isTrue
				}
				return unknown
			}
		}
		if len(qs) != len(args) {
			return nil // an opaque disjunct can always be true
		}
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
	case "!_":
		q := buildQuick(args[0])
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
	case "_==_", "_!=_":
		ref, lit := stringRef(args[0]), stringLiteral(args[1])
		if ref == nil {
			ref, lit = stringRef(args[1]), stringLiteral(args[0])
		}
		if ref == nil || lit == nil {
			return nil
		}
		want, eq := *lit, call.FunctionName() == "_==_"
		return func(a *activation) tri {
			s, ok := ref(a)
			if !ok {
				return unknown
			}
			return boolTri((s == want) == eq)
		}
	case "contains", "startsWith", "endsWith", "matches":
		if !call.IsMemberFunction() || len(args) != 1 {
			return nil
		}
		ref, lit := stringRef(call.Target()), stringLiteral(args[0])
		if ref == nil || lit == nil {
			return nil
		}
		arg := *lit
		var pred func(string) tri
		switch call.FunctionName() {
		case "contains":
			pred = func(s string) tri { return boolTri(strings.Contains(s, arg)) }
		case "startsWith":
			pred = func(s string) tri { return boolTri(strings.HasPrefix(s, arg)) }
		case "endsWith":
			pred = func(s string) tri { return boolTri(strings.HasSuffix(s, arg)) }
		case "matches":
			lits := requiredLiterals(arg)
			if len(lits) == 0 {
				return nil
			}
			// A missing literal means no match; all present means only that a match is possible.
			pred = func(s string) tri {
				for _, l := range lits {
					if !strings.Contains(s, l) {
						return isFalse
					}
				}
				return unknown
			}
		}
		return func(a *activation) tri {
			s, ok := ref(a)
			if !ok {
				return unknown
			}
			return pred(s)
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

// stringRef returns an accessor for a string variable (tool, server, surface, session) or a
// top-level input field (input.f or input["f"]); the accessor reports false when the value is
// absent or not a string.
func stringRef(e ast.Expr) func(*activation) (string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		switch e.AsIdent() {
		case "tool":
			return func(a *activation) (string, bool) { return a.tool, true }
		case "server":
			return func(a *activation) (string, bool) { return a.server, true }
		case "surface":
			return func(a *activation) (string, bool) { return a.surface, true }
		case "session":
			return func(a *activation) (string, bool) { return a.session, true }
		}
	case ast.SelectKind:
		sel := e.AsSelect()
		if sel.IsTestOnly() || sel.Operand().Kind() != ast.IdentKind || sel.Operand().AsIdent() != "input" {
			return nil
		}
		return inputField(sel.FieldName())
	case ast.CallKind:
		call := e.AsCall()
		if call.FunctionName() != "_[_]" || len(call.Args()) != 2 {
			return nil
		}
		target, key := call.Args()[0], stringLiteral(call.Args()[1])
		if target.Kind() != ast.IdentKind || target.AsIdent() != "input" || key == nil {
			return nil
		}
		return inputField(*key)
	}
	return nil
}

func inputField(name string) func(*activation) (string, bool) {
	return func(a *activation) (string, bool) {
		s, ok := a.input[name].(string)
		return s, ok
	}
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
