package gate

import (
	"fmt"

	"github.com/intutic/gate-operator/internal/gate/toolname"
)

// CostLimit bounds the runtime cost of one evaluation of one rule, in CEL cost units; the same
// per-expression budget the Kubernetes API server gives validation rules.
const CostLimit = 1_000_000

// FieldError is a problem with one field of a policy, addressed as the policy spec addresses it
// (spec.rules[3].when), so the controller can report it in status.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// FieldErrors is every problem found, in rule order.
type FieldErrors []FieldError

func (es FieldErrors) Error() string {
	switch len(es) {
	case 0:
		return "no errors"
	case 1:
		return es[0].Error()
	default:
		return fmt.Sprintf("%s (and %d more)", es[0].Error(), len(es)-1)
	}
}

// The variables of a rule's `when`: the CEL environment declares them, the activation resolves
// them, and a prefilter names the one it reads (Prefilter.Var).
const (
	varTool    = "tool"
	varServer  = "server"
	varInput   = "input"
	varSurface = "surface"
	varSession = "session"
	// varCall holds the call's view (CallView).
	varCall = "call"
)

// compiledRule is a rule ready to evaluate. err is set when its expression does not compile;
// evaluation then treats the rule as erroring, so failurePolicy decides.
type compiledRule struct {
	Rule
	index    int
	patterns []toolname.Pattern // compiled tool patterns; empty matches every tool
	filter   quick
	program  *lazyProgram // nil when the rule has no when
	err      error
	// reason and message are what a decision of this rule carries, built once.
	reason, message string
}

// compileRule compiles one rule. Problems are returned as field errors under spec.rules[i].
func compileRule(i int, r Rule) (compiledRule, FieldErrors) {
	cr := compiledRule{Rule: r, index: i, reason: r.Reason}
	if cr.reason == "" {
		cr.reason = "rule " + r.Name
	}
	cr.message = RefusalPrefix + cr.reason
	var errs FieldErrors
	base := fmt.Sprintf("spec.rules[%d]", i)
	if !validVerdict(r.Action) {
		errs = append(errs, FieldError{base + ".action", fmt.Sprintf("%q is not Allow, Ask or Block", r.Action)})
	}
	for j, p := range r.Tools {
		tp, err := toolname.Compile(p)
		if err != nil {
			errs = append(errs, FieldError{fmt.Sprintf("%s.tools[%d]", base, j), fmt.Sprintf("%q is not a valid glob pattern: %v", p, err)})
			continue
		}
		cr.patterns = append(cr.patterns, tp)
	}
	if r.When != "" {
		lp := &lazyProgram{rule: r}
		if r.Prefilter != nil {
			// The snapshot carries the prefilter: the expression is compiled only when needed.
			cr.filter = r.Prefilter.compile()
			cr.program = lp
		} else if filter, err := lp.derive(); err != nil {
			errs = append(errs, FieldError{base + ".when", err.Error()})
		} else {
			cr.filter = filter
			cr.program = lp
		}
	}
	if len(errs) > 0 {
		cr.err = errs
	}
	return cr, errs
}
