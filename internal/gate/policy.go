package gate

import (
	"errors"
	"fmt"
	"sync"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Policy is a snapshot compiled for evaluation. It is immutable and safe for concurrent use.
type Policy struct {
	snap  *Snapshot
	rules []compiledRule
	index *toolIndex
	// onlyTool, when set, is the one (normalized) tool this policy was compiled for by CompileFor.
	onlyTool string
	errs     FieldErrors
	// namespace and name are the snapshot's policy, as caller.namespace and caller.policy.
	namespace, name string
	// readsCaller is set when a rule reads `caller` (always, for a policy CompileFor compiled).
	readsCaller bool
}

// Compile compiles every rule of a verified snapshot. Rules that do not compile are kept and
// count as erroring at evaluation, so failurePolicy decides; their problems are returned too.
func Compile(s *Snapshot) (*Policy, FieldErrors) {
	return compile(s, allRules())
}

// CompileFor compiles only the rules whose tool patterns can match one tool, so the start-up
// cost of a one-shot caller (gate-hook) does not grow with the whole rule set. The policy
// refuses calls to any other tool.
func CompileFor(s *Snapshot, tool, server string) (*Policy, FieldErrors) {
	name := normalizeToolName(CanonicalToolName(tool, server))
	var keep []int
	for i, r := range s.Rules {
		if ruleMatchesTool(r.Tools, name) {
			keep = append(keep, i)
		}
	}
	p, errs := compile(s, selected(keep))
	p.onlyTool = name
	return p, errs
}

// ruleSelection says which rules compile compiles: all of them, or the listed ones (possibly
// none). Distinct types, so an empty list can never be taken for "all".
type ruleSelection struct {
	all     bool
	indices []int
}

func allRules() ruleSelection        { return ruleSelection{all: true} }
func selected(i []int) ruleSelection { return ruleSelection{indices: i} }

// ruleMatchesTool reports whether raw patterns (or no pattern) match a normalized tool name.
// A malformed pattern counts as matching, so its rule is compiled and reports its error.
func ruleMatchesTool(patterns []string, name string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if tp, err := compilePattern(p); err != nil || tp.match(name) {
			return true
		}
	}
	return false
}

func compile(s *Snapshot, sel ruleSelection) (*Policy, FieldErrors) {
	p := &Policy{snap: s, readsCaller: !sel.all}
	p.namespace, p.name = splitPolicy(s.Policy)
	rules := s.Rules
	add := func(i int) {
		cr, errs := compileRule(i, rules[i])
		p.rules = append(p.rules, cr)
		p.errs = append(p.errs, errs...)
	}
	if sel.all {
		for i := range rules {
			add(i)
		}
		// A long-lived gate plans every program now, not on a caller's first decision.
		for _, r := range p.rules {
			if r.program != nil {
				if _, err := r.program.get(); err != nil {
					p.errs = append(p.errs, FieldError{fmt.Sprintf("spec.rules[%d].when", r.index), err.Error()})
				} else if checked, _ := r.program.check(); usesIdent(checked.NativeRep().Expr(), varCaller) {
					p.readsCaller = true
				}
			}
		}
	} else {
		for _, i := range sel.indices {
			add(i)
		}
	}
	var sc *screen
	if sel.all {
		// A long-lived gate screens its calls; a one-shot caller decides one call, which the
		// rules' own prefilters judge sooner than a screen is built.
		sc = newScreen(p.rules)
	}
	p.index = newToolIndex(p.rules, sc)
	return p, p.errs
}

// Snapshot returns the snapshot the policy was compiled from.
func (p *Policy) Snapshot() *Snapshot { return p.snap }

// Errors returns the compile problems of the rules, if any.
func (p *Policy) Errors() FieldErrors { return p.errs }

// Decide decides one call. A panic during evaluation becomes a Block with code gate_crashed.
func (p *Policy) Decide(c *Call) (d Decision) {
	defer func() {
		if r := recover(); r != nil {
			// The panic's value may quote the input, and the reason is logged: its type only.
			d = refusal(CodeGateCrashed, fmt.Sprintf("the gate failed while evaluating the call (%T)", r), p.snap.Digest)
		}
	}()
	return p.decide(c)
}

func (p *Policy) decide(c *Call) Decision {
	s := p.snap
	if s.Invalid != "" {
		return refusal(CodePolicyInvalid, "policy "+s.Policy+" has never compiled: "+s.Invalid, s.Digest)
	}
	name, server, err := ResolveTool(c.Tool, c.Server)
	if err != nil {
		return refusal(CodeInputInvalid, err.Error(), s.Digest)
	}
	if p.onlyTool != "" && normalizeToolName(name) != p.onlyTool {
		return refusal(CodeToolMismatch, "the gate was compiled for another tool", s.Digest)
	}
	entry := p.index.lookup(name)
	var scr screenScratch
	if entry.screen != nil {
		entry.screen.run(p.index.screen, c.Input, &scr)
	}
	dc := decisionCall{policy: p, tool: name, server: server, surface: c.Surface, session: c.Session, input: c.Input, cwd: c.Cwd, caller: c.Caller}
	defer dc.release()
	return p.judge(entry.candidates, &scr, &dc)
}

func (p *Policy) ruleDecision(r *compiledRule, v Verdict, code, reason, message string) Decision {
	d := Decision{Verdict: v, Rule: r.Name, Reason: reason, Code: code, IncidentID: NewIncidentID(), SnapshotDigest: p.snap.Digest}
	if v == Block {
		d.Message = message
	}
	return d
}

var errNotBool = errors.New("when did not evaluate to a bool")

// decisionCall is one call being decided; its activation (for the rules' own prefilters and
// CEL) is made on first use, so a decision whose candidates the screen rules out, or that has
// only rules without a when, never makes one.
// It holds copies of the call's fields, never the *Call: what the activation keeps goes to the
// heap, and so would the caller's Call with it.
type decisionCall struct {
	policy                              *Policy
	tool, server, surface, session, cwd string
	input                               map[string]any
	caller                              Caller
	act                                 *activation
}

func (dc *decisionCall) activation() *activation {
	if dc.act == nil {
		dc.act = activations.Get().(*activation)
		*dc.act = activation{tool: dc.tool, server: dc.server, surface: dc.surface, session: dc.session, input: dc.input, cwd: dc.cwd, policy: dc.policy, callerCopy: dc.caller}
		dc.act.caller = &dc.act.callerCopy
	}
	return dc.act
}

func (dc *decisionCall) release() {
	if dc.act != nil {
		*dc.act = activation{}
		activations.Put(dc.act)
	}
}

// eval evaluates a rule for the call, making the activation only when the rule's when must be
// looked at.
func (dc *decisionCall) eval(r *compiledRule) (bool, error) {
	if r.err != nil || r.program == nil {
		return r.eval(nil) // decided without looking at the call
	}
	return r.eval(dc.activation())
}

// eval reports whether the rule's when holds for the call.
func (r *compiledRule) eval(a *activation) (bool, error) {
	if r.err != nil {
		return false, compileError{r.err}
	}
	if r.program == nil {
		return true, nil
	}
	if r.filter != nil && r.filter(a) == isFalse {
		return false, nil
	}
	prg, err := r.program.get()
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

// activations recycles the per-decision activation, which CEL's interface would otherwise
// move to the heap on every decision.
var activations = sync.Pool{New: func() any { return new(activation) }}

// activation resolves the CEL variables of one call. The input map is wrapped for CEL once,
// on first use, and shared by every rule of the decision.
type activation struct {
	tool, server, surface, session string
	input                          map[string]any
	inputVal                       ref.Val
	// cwd is the call's working directory; callVal its view (CallView), built on the first
	// rule that reads `call`, so a decision no such rule reaches never builds it.
	cwd     string
	callVal ref.Val
	// policy and caller make `caller` (Caller), built on the first rule that reads it.
	policy    *Policy
	caller    *Caller
	callerVal ref.Val
	// callerCopy is what caller points to in a decision's activation (decisionCall).
	callerCopy Caller
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
			a.callVal = callValue(a.tool, a.input, a.cwd)
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
