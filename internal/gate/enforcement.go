package gate

import "fmt"

// Enforcement says whether the Ask and Block verdicts of a policy, or of one rule, take effect.
type Enforcement string

const (
	// Enforce means an Ask holds the call for a human and a Block refuses it.
	Enforce Enforcement = "Enforce"
	// Audit means the gate decides as usual, but an Ask or Block of an audited rule (or of an Audit
	// policy's defaultAction) is recorded in Decision.Would and the call proceeds. An audited
	// rule never changes what takes effect: that is decided by the enforced rules alone. Audit
	// never covers a fault: a missing, corrupt or unverified snapshot, a crash, a policy that
	// never compiled, input that cannot be read, or input too costly to judge still blocks (an
	// unevaluated call is not an audited one). An audited rule that cannot be evaluated under
	// failurePolicy Fail is recorded as a would-be rule_error Block: it gates nothing, and every
	// enforced rule was evaluated.
	Audit Enforcement = "Audit"
)

// validEnforcement reports whether a snapshot may carry e; empty is the policy's (or Enforce).
func validEnforcement(e Enforcement) bool { return e == "" || e == Enforce || e == Audit }

// Mode is the policy's enforcement: Audit only when the snapshot says so. A snapshot written
// before enforcement existed carries none, and enforces.
func (s *Snapshot) Mode() Enforcement {
	if s.Enforcement == Audit {
		return Audit
	}
	return Enforce
}

// RuleMode is the enforcement of one of the snapshot's rules: its own, else the policy's.
func (s *Snapshot) RuleMode(r *Rule) Enforcement {
	switch r.Enforcement {
	case Audit, Enforce:
		return r.Enforcement
	}
	return s.Mode()
}

// AuditedRules counts the rules in Audit, by their own enforcement or the policy's.
func (s *Snapshot) AuditedRules() int {
	n := 0
	for i := range s.Rules {
		if s.RuleMode(&s.Rules[i]) == Audit {
			n++
		}
	}
	return n
}

// normalizeEnforcement writes Enforce as no field at all, and a rule's enforcement only where
// it differs from the policy's: a snapshot in Enforce is byte for byte what gate-hook read
// before enforcement existed. (A gate-hook that old refuses an unknown field, so it blocks
// every call of an Audit snapshot rather than enforce it.)
func (s *Snapshot) normalizeEnforcement() {
	mode := s.Mode()
	if s.Enforcement == Enforce {
		s.Enforcement = ""
	}
	for i := range s.Rules {
		if s.Rules[i].Enforcement == mode {
			s.Rules[i].Enforcement = ""
		}
	}
}

// outcome is one verdict on a call: of a rule (rule set) or of the defaultAction.
type outcome struct {
	rule                  *compiledRule
	verdict               Verdict
	code, reason, message string
}

func ruleOutcome(r *compiledRule) outcome {
	return outcome{rule: r, verdict: r.Action, code: r.Code, reason: r.reason, message: r.message}
}

// judge combines the verdicts of the candidate rules on one call. Two are kept: the most
// restrictive of the enforced rules, which takes effect (the defaultAction when none matched),
// and the most restrictive of all of them, recorded in Decision.Would when it is stricter;
// among equals the first in order gives the reason. An enforced Block ends the evaluation: no
// later rule can be more restrictive, and none can weaken it.
func (p *Policy) judge(candidates []int, scr *screenScratch, dc *decisionCall) Decision {
	s := p.snap
	var enforced, all outcome // rule nil: no rule of that kind matched
	stricter := func(o outcome, than *outcome) {
		if than.rule == nil || o.verdict.rank() > than.verdict.rank() {
			*than = o
		}
	}
	for pos, i := range candidates {
		if scr.ruled(pos) {
			continue // its prefilter is false: the rule does not match, as eval would say
		}
		r := &p.rules[i]
		if dc.lifted != nil && dc.lifted[r.Name] {
			continue // an exception lifts it: it matches nothing, and cannot err
		}
		audited := s.RuleMode(&r.Rule) == Audit
		matched, err := dc.eval(r)
		if err != nil {
			if err == errNeedsCEL {
				return Decision{} // undecided: the call goes to a gate that evaluates CEL
			}
			kind := errorKind(err)
			if kind == ErrorKindCostLimit {
				// Not a broken rule but input too large to judge: refused under either failure
				// policy, and in either mode, since the call was not judged.
				reason := fmt.Sprintf("rule %s could not judge the input within the cost limit", r.Name)
				return p.ruleDecision(r, Block, CodeInputTooCostly, reason, RefusalPrefix+reason)
			}
			if s.FailurePolicy == Ignore {
				continue
			}
			// The reason names the kind of error, never its text, which can quote the input.
			reason := fmt.Sprintf("rule %s could not be evaluated: %s", r.Name, kind)
			if !audited {
				return p.ruleDecision(r, Block, CodeRuleError, reason, RefusalPrefix+reason)
			}
			// An audited rule gates nothing: its failure is the Block it would have been.
			stricter(outcome{rule: r, verdict: Block, code: CodeRuleError, reason: reason, message: RefusalPrefix + reason}, &all)
			continue
		}
		if !matched {
			continue
		}
		o := ruleOutcome(r)
		stricter(o, &all)
		if audited {
			continue
		}
		if r.Action == Block {
			return p.ruleDecision(r, Block, r.Code, r.reason, r.message)
		}
		stricter(o, &enforced)
	}

	var d Decision
	if enforced.rule != nil {
		d = p.ruleDecision(enforced.rule, enforced.verdict, enforced.code, enforced.reason, enforced.message)
	} else {
		d = p.defaultDecision(all.rule != nil)
	}
	would := all
	if all.rule == nil {
		would = p.defaultOutcome(false)
	}
	if would.verdict.rank() > d.Verdict.rank() {
		d.Would = &AuditedVerdict{Verdict: would.verdict, Reason: would.reason, Code: would.code}
		if would.rule != nil {
			d.Would.Rule = would.rule.Name
		}
	}
	return d
}

// The reasons of the defaultAction, by whether rules in Audit matched (then "no enforced rule"):
// constants, so a decision by the defaultAction builds no string.
var defaultReasons = [2]struct{ allow, ask, block string }{
	{"no rule matched", "no rule matched; the policy's defaultAction is Ask", "no rule allows this call and the policy's defaultAction is Block"},
	{"no enforced rule matched", "no enforced rule matched; the policy's defaultAction is Ask", "no enforced rule allows this call and the policy's defaultAction is Block"},
}

// defaultOutcome is the policy's defaultAction as a verdict; auditedMatched says rules in Audit
// matched, so its reason speaks of enforced rules.
func (p *Policy) defaultOutcome(auditedMatched bool) outcome {
	reasons := &defaultReasons[0]
	if auditedMatched {
		reasons = &defaultReasons[1]
	}
	switch p.snap.DefaultAction {
	case Allow:
		return outcome{verdict: Allow, reason: reasons.allow}
	case Ask:
		return outcome{verdict: Ask, code: CodeDefaultAction, reason: reasons.ask}
	default:
		return outcome{verdict: Block, code: CodeDefaultAction, reason: reasons.block, message: RefusalPrefix + reasons.block}
	}
}

// defaultDecision is the decision when no enforced rule matched: the defaultAction, which in an
// Audit policy takes effect only as Allow (judge records the rest).
func (p *Policy) defaultDecision(auditedMatched bool) Decision {
	o := p.defaultOutcome(auditedMatched)
	if p.snap.Mode() == Audit && o.verdict != Allow {
		o = p.defaultAllow(auditedMatched)
	}
	return Decision{Verdict: o.verdict, Reason: o.reason, Code: o.code, Message: o.message, IncidentID: NewIncidentID(), SnapshotDigest: p.snap.Digest}
}

// defaultAllow is the Allow an Audit policy's defaultAction takes effect as.
func (p *Policy) defaultAllow(auditedMatched bool) outcome {
	if auditedMatched {
		return outcome{verdict: Allow, reason: defaultReasons[1].allow}
	}
	return outcome{verdict: Allow, reason: defaultReasons[0].allow}
}
