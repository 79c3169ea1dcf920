//go:build !nocel

package gate

import (
	"fmt"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// celValues are an activation's variables as CEL values, made on first use.
type celValues struct {
	inputVal, callVal, callerVal ref.Val
	viewCache
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case varTool:
		return types.String(a.tool), true
	case varServer:
		return types.String(a.server), true
	case varSurface:
		return types.String(a.surface), true
	case varSession:
		return types.String(a.session), true
	case varInput:
		if a.inputVal == nil {
			a.inputVal = types.NewStringInterfaceMap(types.DefaultTypeAdapter, a.input)
		}
		return a.inputVal, true
	case varCall:
		if a.callVal == nil {
			a.callVal = a.callValue()
		}
		return a.callVal, true
	case varCaller:
		if a.callerVal == nil {
			a.callerVal = a.policy.callerValue(a.caller, a.session)
		}
		return a.callerVal, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// planAll plans every program of a long-lived gate now, not on a caller's first decision, and
// notes whether a rule reads `caller`.
func (p *Policy) planAll() {
	for _, r := range p.rules {
		if r.program != nil {
			if _, err := r.program.get(); err != nil {
				p.errs = append(p.errs, FieldError{fmt.Sprintf("spec.rules[%d].when", r.index), err.Error()})
			} else if checked, _ := r.program.check(); usesIdent(checked.Expr(), varCaller) {
				p.readsCaller = true
			}
		}
	}
}
