//go:build !nocel

package gate

import (
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// varCaller is the variable that holds a call's Caller.
const varCaller = "caller"

// callerTypeName is the CEL name of Caller, as ext.NativeTypes names it.
const callerTypeName = "gate.Caller"

// callerValue is the CEL value of the caller of a call decided by p: what the surface said
// (in), with the policy's namespace and name and the call's session.
func (p *Policy) callerValue(in *Caller, session string) ref.Val {
	c := Caller{Session: session}
	if p != nil {
		c.Namespace, c.Policy = p.namespace, p.name
	}
	if in != nil {
		c.ServiceAccount, c.Pod, c.Agent = in.ServiceAccount, in.Pod, in.Agent
	}
	env, err := environment()
	if err != nil {
		return types.NewErr("the CEL environment cannot be built")
	}
	return env.CELTypeAdapter().NativeToValue(&c)
}

// usesIdent reports whether a checked expression names the identifier (a comprehension
// variable of that name counts too, which only errs on the side of looking the caller up).
func usesIdent(e ast.Expr, name string) bool {
	found := false
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		found = found || e.Kind() == ast.IdentKind && e.AsIdent() == name
	}))
	return found
}
