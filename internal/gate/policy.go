package gate

import (
	"errors"
	"fmt"
	"sync"

	"github.com/intutic/gate-operator/internal/gate/toolname"
)

// Policy is a snapshot compiled for evaluation. It is immutable and safe for concurrent use.
type Policy struct {
	snap  *Snapshot
	rules []compiledRule
	index *toolIndex
	// only, when set, is the one tool this policy was compiled for by CompileFor.
	only *onlyTool
	errs FieldErrors
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
//
// The tool is resolved here, once: deciding the call it was compiled for reuses the resolution.
func CompileFor(s *Snapshot, tool, server string) (*Policy, FieldErrors) {
	only := &onlyTool{tool: tool, server: server}
	only.resolved, only.err = toolname.Resolve(tool, server)
	only.key = only.resolved.Key
	if only.err != nil {
		only.key = toolname.Normalize(tool) // rules are chosen by the name as reported; deciding refuses the call
	}
	var keep []int
	for i, r := range s.Rules {
		if ruleMatchesTool(r.Tools, only.key) {
			keep = append(keep, i)
		}
	}
	p, errs := compile(s, selected(keep))
	p.only = only
	return p, errs
}

// onlyTool is the tool a policy was compiled for (CompileFor): as the call reported it, and
// resolved, or why it does not resolve.
type onlyTool struct {
	tool, server string
	resolved     toolname.Tool
	err          error
	key          string // the folded name the policy's rules were chosen by
}

// resolve resolves a call's tool: once per decision, or not at all for the call a policy was
// compiled for.
func (p *Policy) resolve(c *Call) (toolname.Tool, error) {
	if o := p.only; o != nil && c.Tool == o.tool && c.Server == o.server {
		return o.resolved, o.err
	}
	return toolname.Resolve(c.Tool, c.Server)
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
		if tp, err := toolname.Compile(p); err != nil || tp.Match(name) {
			return true
		}
	}
	return false
}

func compile(s *Snapshot, sel ruleSelection) (*Policy, FieldErrors) {
	p := &Policy{snap: s, readsCaller: !sel.all}
	if sel.all {
		p.rules = make([]compiledRule, 0, len(s.Rules))
	} else {
		p.rules = make([]compiledRule, 0, len(sel.indices))
	}
	p.namespace, p.name = splitPolicy(s.Policy)
	rules := s.Rules
	add := func(i int) {
		cr, errs := compileRule(i, rules[i])
		if cr.program != nil && s.precompiled != nil {
			cr.program.usePrecompiled(s.precompiled, i)
		}
		p.rules = append(p.rules, cr)
		p.errs = append(p.errs, errs...)
	}
	if sel.all {
		for i := range rules {
			add(i)
		}
		p.planAll()
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
	if d = p.decide(c, false); d.Verdict == "" {
		// Only a build without CEL (the nocel tag) leaves a call undecided; it is refused.
		d = refusal(CodeGateCrashed, "this gate was built without CEL and cannot evaluate the policy's rules", p.snap.Digest)
	}
	d.RecordInput = p.snap.RecordInput
	return d
}

// DecideWithoutCEL decides the call as Decide does, when it can without evaluating CEL: every
// candidate rule it reaches has no when, or its prefilter rules it out (or an earlier rule
// decides alone). Otherwise it returns false, and the call must be put to a policy that
// evaluates CEL: gate-hook, built without CEL, hands it to gate-hook-cel. A decision it returns
// is the one Decide returns, incident ID aside.
func (p *Policy) DecideWithoutCEL(c *Call) (d Decision, decided bool) {
	defer func() {
		if r := recover(); r != nil {
			d, decided = refusal(CodeGateCrashed, fmt.Sprintf("the gate failed while evaluating the call (%T)", r), p.snap.Digest), true
		}
	}()
	d = p.decide(c, true)
	return d, d.Verdict != ""
}

// decideLifted decides the call as Decide does with the named rules lifted: they match
// nothing, and their errors do not count (an exception's rules, see LayeredPolicy). withoutCEL
// leaves the call undecided, as DecideWithoutCEL does, when a rule needs CEL.
func (p *Policy) decideLifted(c *Call, lifted map[string]bool, withoutCEL bool) (d Decision, decided bool) {
	defer func() {
		if r := recover(); r != nil {
			d, decided = refusal(CodeGateCrashed, fmt.Sprintf("the gate failed while evaluating the call (%T)", r), p.snap.Digest), true
		}
	}()
	d = p.decideWith(c, withoutCEL, lifted)
	if d.Verdict == "" && !withoutCEL {
		// Only a build without CEL (the nocel tag) leaves a call undecided; it is refused.
		return refusal(CodeGateCrashed, "this gate was built without CEL and cannot evaluate the policy's rules", p.snap.Digest), true
	}
	return d, d.Verdict != ""
}

// decide decides a call; withoutCEL leaves it undecided (a zero Decision) at the first rule
// that needs CEL.
func (p *Policy) decide(c *Call, withoutCEL bool) Decision { return p.decideWith(c, withoutCEL, nil) }

// decideWith is decide with the named rules lifted (none when lifted is nil).
func (p *Policy) decideWith(c *Call, withoutCEL bool, lifted map[string]bool) Decision {
	s := p.snap
	if s.Invalid != "" {
		return refusal(CodePolicyInvalid, "policy "+s.Policy+" has never compiled: "+s.Invalid, s.Digest)
	}
	tool, err := p.resolve(c)
	if err != nil {
		return refusal(CodeInputInvalid, err.Error(), s.Digest)
	}
	if p.only != nil && tool.Key != p.only.key {
		return refusal(CodeToolMismatch, "the gate was compiled for another tool", s.Digest)
	}
	entry := p.index.lookup(tool)
	var scr screenScratch
	if entry.screen != nil {
		entry.screen.run(p.index.screen, c.Input, &scr)
	}
	dc := decisionCall{policy: p, tool: tool.Name, server: tool.Server, surface: c.Surface, session: c.Session, input: c.Input, cwd: c.Cwd, caller: c.Caller, withoutCEL: withoutCEL, lifted: lifted}
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

var (
	errNotBool = errors.New("when did not evaluate to a bool")
	// errNeedsCEL is a rule's answer when its when must be evaluated and the decision is made
	// without CEL (DecideWithoutCEL, or a build with the nocel tag): the call is left undecided.
	errNeedsCEL = errors.New("the rule needs CEL")
)

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
	withoutCEL                          bool
	// lifted are the rules an exception lifts for this call: they are skipped.
	lifted map[string]bool
	act    *activation
}

func (dc *decisionCall) activation() *activation {
	if dc.act == nil {
		dc.act = activations.Get().(*activation)
		*dc.act = activation{tool: dc.tool, server: dc.server, surface: dc.surface, session: dc.session, input: dc.input, cwd: dc.cwd, policy: dc.policy, callerCopy: dc.caller, withoutCEL: dc.withoutCEL}
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

// eval reports whether the rule's when holds for the call. Without CEL (DecideWithoutCEL, or
// the nocel build), a rule its prefilter does not rule out answers errNeedsCEL.
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
	if a.withoutCEL {
		return false, errNeedsCEL
	}
	return r.program.eval(a)
}

// activations recycles the per-decision activation, which CEL's interface would otherwise
// move to the heap on every decision.
var activations = sync.Pool{New: func() any { return new(activation) }}

// activation is one call's variables, for the rules' prefilters and CEL. Their CEL values
// (celValues: the input map wrapped for CEL, the call's view, the caller) are made on first use
// and shared by every rule of the decision, so a decision no rule reading them reaches never
// makes them.
type activation struct {
	tool, server, surface, session string
	input                          map[string]any
	// cwd is the call's working directory, for its view (CallView).
	cwd string
	// policy and caller make `caller` (Caller).
	policy *Policy
	caller *Caller
	// callerCopy is what caller points to in a decision's activation (decisionCall).
	callerCopy Caller
	// withoutCEL makes a rule that needs CEL answer errNeedsCEL (DecideWithoutCEL).
	withoutCEL bool
	celValues
}
