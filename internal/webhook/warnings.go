package webhook

import (
	"fmt"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"github.com/gobwas/glob/syntax"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/gate"
)

// maxWarnings bounds the warnings of one policy: the API server keeps 4 KiB of warnings per
// request and truncates the rest.
const maxWarnings = 12

// probeBudget bounds the gate decisions the unreachable-rule check spends on one policy (512
// rules of 64 patterns could otherwise ask for millions); past it the check stops, since a
// warning is advice and admission must answer within its timeout.
const probeBudget = 20000

// PolicyWarnings returns what is legal in a policy whose rules compile but probably not what
// its author meant, as admission warnings:
//   - a rule that never decides, because an earlier enforced Block rule with no `when` matches
//     every call to its tools (an enforced Block ends the evaluation);
//   - a tool pattern without glob syntax that names no tool of the gate's tool-shape table (the
//     built-in tools of Claude Code, @ai-sdk/harness and Managed Agents), no MCP tool and none of
//     spec.tools;
//   - an enforced Ask (a rule's, or defaultAction) whose `when` does not read `surface`: in a
//     sandbox pod it reaches Claude Code's own permission flow, which headless denies.
func PolicyWarnings(p *gatev1.HarnessAgentPolicy) []string {
	var out []string
	out = append(out, unreachableRules(p)...)
	out = append(out, unknownTools(p)...)
	out = append(out, headlessAsks(p)...)
	if len(out) > maxWarnings {
		out = append(out[:maxWarnings-1], fmt.Sprintf("and %d more warnings like these", len(out)-maxWarnings+1))
	}
	return out
}

// enforced reports whether a rule's verdicts take effect: its own enforcement, else the policy's.
func enforced(p *gatev1.HarnessAgentPolicy, r *gatev1.Rule) bool {
	e := r.Enforcement
	if e == "" {
		e = p.Spec.Enforcement
	}
	return e != gatev1.EnforcementAudit
}

func ruleRef(i int, r *gatev1.Rule) string { return fmt.Sprintf("spec.rules[%d] (%s)", i, r.Name) }

// unreachableRules finds the rules an earlier blocker shadows. A blocker is an enforced Block
// rule without `when`; it shadows a later rule when every pattern of the later rule is covered:
// a pattern without glob syntax by the blocker's own matching of that name, a glob by an equal
// pattern of the blocker's (glob inclusion is not decided, so some shadowed rules go unnamed,
// and no rule is named that is not shadowed).
func unreachableRules(p *gatev1.HarnessAgentPolicy) []string {
	var out []string
	rules := p.Spec.Rules
	budget := probeBudget
	var blockers []int
	probes := map[int]*toolProbe{}
	for j := range rules {
		later := &rules[j]
		for _, i := range blockers {
			if budget <= 0 {
				return out
			}
			if probes[i] == nil {
				probes[i] = newToolProbe(rules[i].Tools)
			}
			if covers(probes[i], rules[i].Tools, later.Tools, &budget) {
				out = append(out, fmt.Sprintf("%s never decides: %s, an enforced Block with no `when`, matches every call to its tools first, and an enforced Block ends the evaluation",
					ruleRef(j, later), ruleRef(i, &rules[i])))
				break
			}
		}
		if later.Action == gatev1.ActionBlock && later.When == "" && enforced(p, later) {
			blockers = append(blockers, j)
		}
	}
	return out
}

// covers reports whether a blocker with the given patterns (probe compiled from them) matches
// every call a rule with patterns later can match.
func covers(probe *toolProbe, blocker, later []string, budget *int) bool {
	if len(blocker) == 0 || slices.ContainsFunc(blocker, func(p string) bool { return strings.Trim(p, "*") == "" }) {
		return true // every tool
	}
	if len(later) == 0 {
		return false
	}
	for _, pat := range later {
		if isLiteral(pat) {
			*budget--
			if !probe.matches(pat) {
				return false
			}
			continue
		}
		if !containsFold(blocker, pat) {
			return false
		}
	}
	return true
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// isLiteral reports whether a tool pattern has no glob syntax, so it names one tool.
func isLiteral(p string) bool {
	for i := range len(p) {
		if syntax.IsSpecial(p[i]) {
			return false
		}
	}
	return true
}

// unknownTools names the patterns that name a tool no runtime has. Only patterns without glob
// syntax are judged, by the gate's own table (gate.ViewOf: kind "unknown" is a tool the table
// does not know); MCP patterns are left alone, since MCP servers are the user's.
func unknownTools(p *gatev1.HarnessAgentPolicy) []string {
	var custom []string
	for _, t := range p.Spec.Tools.Approve {
		custom = append(custom, string(t))
	}
	for _, t := range p.Spec.Tools.Deny {
		custom = append(custom, string(t))
	}
	var out []string
	for i := range p.Spec.Rules {
		for k, pat := range p.Spec.Rules[i].Tools {
			if !isLiteral(pat) || strings.HasPrefix(strings.ToLower(pat), "mcp__") {
				continue
			}
			if gate.ViewOf(&gate.Call{Tool: pat}).Kind != gate.KindUnknown {
				continue
			}
			if !matchesAny(pat, custom) {
				out = append(out, fmt.Sprintf("spec.rules[%d].tools[%d]: %q is no built-in tool of Claude Code, @ai-sdk/harness or Managed Agents, and not in spec.tools: check the spelling (MCP tools are mcp__<server>__<tool>)",
					i, k, pat))
			}
		}
	}
	return out
}

// matchesAny reports whether a tool pattern matches one of names (spec.tools' custom tools).
func matchesAny(pattern string, names []string) bool {
	if len(names) == 0 {
		return false
	}
	probe := newToolProbe([]string{pattern})
	for _, n := range names {
		if probe.matches(n) {
			return true
		}
	}
	return false
}

// headlessAskNote says what an Ask does in a sandbox pod, where the hook answers Claude Code.
const headlessAskNote = "in a sandbox pod the hook hands the call to Claude Code's own permission flow, and headless Claude Code (-p, or the Agent SDK without canUseTool) has nobody to ask, so it denies the call; the confirmer and the harness and workflow APIs hold an Ask for a human"

// headlessAsks warns, once, about the enforced Asks that apply on every surface: rules' (unless
// a rule's `when` reads `surface`, so its author chose where it asks) and defaultAction's.
func headlessAsks(p *gatev1.HarnessAgentPolicy) []string {
	var asks []string
	for i := range p.Spec.Rules {
		r := &p.Spec.Rules[i]
		if r.Action == gatev1.ActionAsk && enforced(p, r) && !readsSurface(r.When) {
			asks = append(asks, ruleRef(i, r))
		}
	}
	if p.Spec.DefaultAction == gatev1.ActionAsk && p.Spec.Enforcement != gatev1.EnforcementAudit {
		asks = append(asks, "spec.defaultAction")
	}
	switch {
	case len(asks) == 0:
		return nil
	case len(asks) > 4:
		asks = append(asks[:3], fmt.Sprintf("%d more", len(asks)-3))
	}
	return []string{fmt.Sprintf("Ask in %s: %s (a rule whose `when` reads surface is not counted)", strings.Join(asks, ", "), headlessAskNote)}
}

// parser parses rules' expressions for the identifiers they name; it declares nothing, since
// parsing needs no declarations (the gate compiles them).
var parser, parserErr = cel.NewEnv()

// readsSurface reports whether an expression names the variable surface.
func readsSurface(when string) bool {
	if when == "" || parserErr != nil {
		return false
	}
	parsed, iss := parser.Parse(when)
	if iss.Err() != nil {
		return false
	}
	found := false
	ast.PreOrderVisit(parsed.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() == ast.IdentKind && e.AsIdent() == "surface" {
			found = true
		}
	}))
	return found
}

// toolProbe answers whether tool patterns match a tool name by the gate's own matching: a
// one-rule policy that blocks the patterns' tools, asked about the name.
type toolProbe struct{ policy *gate.Policy }

func newToolProbe(patterns []string) *toolProbe {
	snap, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "admission/probe"},
		[]gate.Rule{{Name: "probe", Tools: patterns, Action: gate.Block, Reason: "probe"}})
	if err != nil {
		return &toolProbe{}
	}
	policy, errs := gate.Compile(snap)
	if len(errs) > 0 {
		return &toolProbe{}
	}
	return &toolProbe{policy: policy}
}

func (t *toolProbe) matches(tool string) bool {
	if t.policy == nil {
		return false
	}
	d := t.policy.Decide(&gate.Call{Tool: tool, Input: map[string]any{}, Surface: "api"})
	return d.Rule == "probe"
}
