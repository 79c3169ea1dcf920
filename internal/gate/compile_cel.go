//go:build !nocel

package gate

import (
	"fmt"
	"sync"
	"sync/atomic"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"
)

// BuiltWithCEL says whether this build of the package evaluates CEL: false with the nocel build
// tag, which gate-hook is built with (see Policy.DecideWithoutCEL).
const BuiltWithCEL = true

// The rules' CEL: the environment, compiling and planning each expression, and evaluating it.
// A gate-hook built with the nocel tag has none of it (compile_nocel.go): it decides only what
// the prefilters decide alone and hands every other call to gate-hook-cel.

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
		baseEnv, baseErr = cel.NewEnv(baseOptions()...)
	})
	return baseEnv, baseErr
}

// baseOptions are the options of baseEnvironment.
func baseOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Variable(varTool, cel.StringType),
		cel.Variable(varServer, cel.StringType),
		cel.Variable(varInput, cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable(varSurface, cel.StringType),
		cel.Variable(varSession, cel.StringType),
		ext.Strings(),
	}
}

// ruleEnvironment is the environment a rule's expression is checked and planned in: the base
// one when its parsed form names no identifier or function of callLibrary, the whole one
// otherwise (also when it does not parse, so its errors read the same).
func ruleEnvironment(when string) (*cel.Env, error) {
	env, _, err := parseRule(when)
	return env, err
}

// parseRule is ruleEnvironment, and the parsed expression when it parses. Parsing is most of
// what compiling a rule costs (cel-go's parser is ANTLR's), and the parse does not depend on
// the environment, which adds no macro: the expression is parsed once, then checked in it.
func parseRule(when string) (*cel.Env, *cel.Ast, error) {
	base, err := baseEnvironment()
	if err != nil {
		return nil, nil, err
	}
	parsed, iss := base.Parse(when)
	if iss.Err() != nil {
		env, err := environment()
		return env, nil, err
	}
	if usesCallLibrary(parsed.NativeRep().Expr()) {
		env, err := environment()
		return env, parsed, err
	}
	return base, parsed, nil
}

// lazyProgram compiles a rule's expression and plans it into a CEL program on
// first use, so a one-shot caller pays only for the rules its prefilters cannot rule out.
type lazyProgram struct {
	rule Rule
	// pre and index find the rule's checked expression in the checked rules file beside a
	// snapshot loaded from a file (checked.go); pre is nil otherwise.
	pre   *precompiled
	index int

	checkOnce sync.Once
	env       *cel.Env // the environment it was checked in (ruleEnvironment)
	checked   *cel.Ast // checked here from the source; nil when it came from the file
	native    *celast.AST
	checkErr  error

	planOnce sync.Once
	prg      cel.Program
	planErr  error
}

// check returns the rule's checked expression: from the checked rules file when it has a
// usable one, else parsed and checked from the source.
func (l *lazyProgram) check() (*celast.AST, error) {
	l.checkOnce.Do(func() {
		if l.checkPrecompiled() {
			return
		}
		env, parsed, err := parseRule(l.rule.When)
		if err != nil {
			l.checkErr = fmt.Errorf("the CEL environment cannot be built: %w", err)
			return
		}
		l.env = env
		l.checked, l.checkErr = checkExpression(env, l.rule, parsed)
		if l.checkErr == nil {
			l.native = l.checked.NativeRep()
		}
	})
	return l.native, l.checkErr
}

// checkPrecompiled takes the rule's checked expression from the checked rules file when it
// has a usable one: it plans in the environment its expression needs and yields a bool or
// dyn. Otherwise the rule is parsed and checked from its source.
func (l *lazyProgram) checkPrecompiled() bool {
	checked := l.pre.ast(l.index, l.rule.When)
	if checked == nil {
		return false
	}
	env, err := baseEnvironment()
	full := usesCallLibrary(checked.Expr())
	if err == nil && full {
		env, err = environment()
	}
	// The expression was checked in an environment that declared what this one declares, or
	// it is not used: its overload IDs and types mean only what that environment said.
	if err != nil || !l.pre.checkedIn(full) {
		return false
	}
	if out := checked.GetType(checked.Expr().ID()); !out.IsExactType(cel.BoolType) && !out.IsExactType(cel.DynType) {
		return false
	}
	prg, err := env.PlanProgram(checked, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(CostLimit))
	if err != nil {
		return false
	}
	l.env, l.native, l.prg = env, checked, prg
	return true
}

// usePrecompiled points the rule at the checked rules file beside its snapshot.
func (l *lazyProgram) usePrecompiled(p *precompiled, index int) { l.pre, l.index = p, index }

func (l *lazyProgram) get() (cel.Program, error) {
	l.planOnce.Do(func() {
		checked, err := l.check()
		if err != nil || l.prg != nil { // planned already when it came checked (checkPrecompiled)
			l.planErr = err
			return
		}
		l.prg, l.planErr = l.env.PlanProgram(checked, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(CostLimit))
	})
	return l.prg, l.planErr
}

// checkExpression compiles a rule's when, or checks parsed (its parse) when not nil, and checks
// that it yields a bool (or dyn, checked again at evaluation).
func checkExpression(env *cel.Env, r Rule, parsed *cel.Ast) (*cel.Ast, error) {
	expressionChecks.Add(1)
	var checked *cel.Ast
	var iss *cel.Issues
	if parsed != nil {
		checked, iss = env.Check(parsed)
	} else {
		checked, iss = env.Compile(r.When)
	}
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

// derive checks the expression now, for a rule the snapshot carries no prefilter of, and
// returns the prefilter derived from it (nil when it has none).
func (l *lazyProgram) derive() (quick, error) {
	checked, err := l.check()
	if err != nil {
		return nil, err
	}
	if pf := prefilterOf(checked.Expr()); pf != nil {
		return pf.compile(), nil
	}
	return nil, nil
}

// eval evaluates the expression for the call.
func (l *lazyProgram) eval(a *activation) (bool, error) {
	prg, err := l.get()
	if err != nil {
		return false, compileError{err}
	}
	out, _, err := prg.Eval(a)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, errNotBool
	}
	return bool(b), nil
}

// ValidateRules compiles every rule and returns every problem: malformed tool patterns, CEL
// compile errors, a when that is not boolean, and duplicate names.
func ValidateRules(rules []Rule) FieldErrors {
	_, _, errs := compileSource(rules)
	return errs
}

// compileSource compiles the rules as a policy states them, once each: it returns every
// problem (as ValidateRules) and, when there is none, the rules with their prefilters derived
// from the checked expressions.
func compileSource(rules []Rule) ([]Rule, []*cel.Ast, FieldErrors) {
	if _, err := environment(); err != nil {
		return nil, nil, FieldErrors{{"spec.rules", "the CEL environment cannot be built: " + err.Error()}}
	}
	var errs FieldErrors
	out := make([]Rule, len(rules))
	asts := make([]*cel.Ast, len(rules))
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
				r.Prefilter = boundedPrefilter(prefilterOf(checked.Expr()), r.When)
				asts[i] = cr.program.checked
			}
		}
		out[i] = r
	}
	if len(errs) > 0 {
		return nil, nil, errs
	}
	return out, asts, nil
}

// BuildSnapshot builds the snapshot of a rule list and its policy metadata: it validates and
// compiles every rule (the error is FieldErrors when one does not), records their prefilters,
// and sets the digest.
func BuildSnapshot(meta PolicyMeta, rules []Rule) (*Snapshot, error) {
	s, _, err := buildSnapshot(meta, rules)
	return s, err
}

// BuildSnapshotChecked is BuildSnapshot, and the snapshot's checked rules file
// (CheckedFileName): the expressions as they were checked building it, which gate-hook-cel
// plans without parsing them again; nil when no rule has a when.
func BuildSnapshotChecked(meta PolicyMeta, rules []Rule) (*Snapshot, []byte, error) {
	s, asts, err := buildSnapshot(meta, rules)
	if err != nil {
		return nil, nil, err
	}
	checked, err := encodeChecked(s.Digest, asts)
	if err != nil {
		return nil, nil, err
	}
	return s, checked, nil
}

func buildSnapshot(meta PolicyMeta, rules []Rule) (*Snapshot, []*cel.Ast, error) {
	filtered, asts, errs := compileSource(rules)
	if len(errs) > 0 {
		return nil, nil, errs
	}
	s, err := assemble(meta, filtered)
	return s, asts, err
}
