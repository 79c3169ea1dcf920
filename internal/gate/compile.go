package gate

import (
	"fmt"
	"sync"
	"sync/atomic"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
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
)

var (
	envOnce, baseOnce sync.Once
	celEnv, baseEnv   *cel.Env
	envErr, baseErr   error
)

// environment is the CEL environment of every rule: the standard library, the strings
// extension, the variables tool, server, input, surface, session, call (the call's view) and
// caller (who is calling, caller.go), and the path, URL and network functions (celfuncs.go). It
// is built once.
func environment() (*cel.Env, error) {
	envOnce.Do(func() {
		base, err := baseEnvironment()
		if err != nil {
			envErr = err
			return
		}
		celEnv, envErr = base.Extend(callLibrary()...)
	})
	return celEnv, envErr
}

// baseEnvironment is environment without the call's view, the caller and the functions. A
// rule that names none of them is checked and planned in it, so a one-shot caller (gate-hook)
// whose rules do not use them never builds them (a tenth of a millisecond).
func baseEnvironment() (*cel.Env, error) {
	baseOnce.Do(func() {
		baseEnv, baseErr = cel.NewEnv(
			cel.Variable(varTool, cel.StringType),
			cel.Variable(varServer, cel.StringType),
			cel.Variable(varInput, cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable(varSurface, cel.StringType),
			cel.Variable(varSession, cel.StringType),
			ext.Strings(),
		)
	})
	return baseEnv, baseErr
}

// ruleEnvironment is the environment a rule's expression is checked and planned in: the base
// one when its parsed form names no identifier or function of callLibrary, the whole one
// otherwise (also when it does not parse, so its errors read the same).
func ruleEnvironment(when string) (*cel.Env, error) {
	base, err := baseEnvironment()
	if err != nil {
		return nil, err
	}
	parsed, iss := base.Parse(when)
	if iss.Err() != nil || usesCallLibrary(parsed.NativeRep().Expr()) {
		return environment()
	}
	return base, nil
}

// compiledRule is a rule ready to evaluate. err is set when its expression does not compile;
// evaluation then treats the rule as erroring, so failurePolicy decides.
type compiledRule struct {
	Rule
	index    int
	patterns []toolPattern // compiled tool patterns; empty matches every tool
	filter   quick
	program  *lazyProgram // nil when the rule has no when
	err      error
	// reason and message are what a decision of this rule carries, built once.
	reason, message string
}

// lazyProgram compiles a rule's expression and plans it into a CEL program on
// first use, so a one-shot caller pays only for the rules its prefilters cannot rule out.
type lazyProgram struct {
	rule Rule

	checkOnce sync.Once
	env       *cel.Env // the environment it was checked in (ruleEnvironment)
	checked   *cel.Ast
	checkErr  error

	planOnce sync.Once
	prg      cel.Program
	planErr  error
}

func (l *lazyProgram) check() (*cel.Ast, error) {
	l.checkOnce.Do(func() {
		env, err := ruleEnvironment(l.rule.When)
		if err != nil {
			l.checkErr = fmt.Errorf("the CEL environment cannot be built: %w", err)
			return
		}
		l.env = env
		l.checked, l.checkErr = checkExpression(env, l.rule)
	})
	return l.checked, l.checkErr
}

func (l *lazyProgram) get() (cel.Program, error) {
	l.planOnce.Do(func() {
		checked, err := l.check()
		if err != nil {
			l.planErr = err
			return
		}
		l.prg, l.planErr = l.env.Program(checked, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(CostLimit))
	})
	return l.prg, l.planErr
}

// checkExpression compiles a rule's when and checks that it yields a bool (or dyn, checked
// again at evaluation).
func checkExpression(env *cel.Env, r Rule) (*cel.Ast, error) {
	expressionChecks.Add(1)
	checked, iss := env.Compile(r.When)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if out := checked.OutputType(); !out.IsExactType(cel.BoolType) && !out.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("must evaluate to bool, not %s", out)
	}
	return checked, nil
}

// expressionChecks counts the expressions parsed and type-checked, for the test that a snapshot
// build checks each once.
var expressionChecks atomic.Int64

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
		tp, err := compilePattern(p)
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
		} else if checked, err := lp.check(); err != nil {
			errs = append(errs, FieldError{base + ".when", err.Error()})
		} else {
			if pf := prefilterOf(checked.NativeRep().Expr()); pf != nil {
				cr.filter = pf.compile()
			}
			cr.program = lp
		}
	}
	if len(errs) > 0 {
		cr.err = errs
	}
	return cr, errs
}

// ValidateRules compiles every rule and returns every problem: malformed tool patterns, CEL
// compile errors, a when that is not boolean, and duplicate names.
func ValidateRules(rules []Rule) FieldErrors {
	_, errs := compileSource(rules)
	return errs
}

// compileSource compiles the rules as a policy states them, once each: it returns every
// problem (as ValidateRules) and, when there is none, the rules with their prefilters derived
// from the checked expressions.
func compileSource(rules []Rule) ([]Rule, FieldErrors) {
	if _, err := environment(); err != nil {
		return nil, FieldErrors{{"spec.rules", "the CEL environment cannot be built: " + err.Error()}}
	}
	var errs FieldErrors
	out := make([]Rule, len(rules))
	seen := make(map[string]int, len(rules))
	for i, r := range rules {
		if j, dup := seen[r.Name]; dup {
			errs = append(errs, FieldError{fmt.Sprintf("spec.rules[%d].name", i), fmt.Sprintf("%q is already the name of spec.rules[%d]", r.Name, j)})
		}
		seen[r.Name] = i
		r.Prefilter = nil // compile the source, not a derived form
		cr, ferrs := compileRule(i, r)
		errs = append(errs, ferrs...)
		if cr.program != nil && len(ferrs) == 0 {
			if _, err := cr.program.get(); err != nil {
				errs = append(errs, FieldError{fmt.Sprintf("spec.rules[%d].when", i), err.Error()})
			} else {
				// check() is memoised: the prefilter comes from the same checked expression.
				checked, _ := cr.program.check()
				r.Prefilter = boundedPrefilter(prefilterOf(checked.NativeRep().Expr()), r.When)
			}
		}
		out[i] = r
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}
