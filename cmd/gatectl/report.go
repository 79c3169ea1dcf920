package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/intutic/gate-operator/internal/gate"
)

// report is what `gatectl test` found. It names cases, rules and codes and quotes the gate's
// reasons, which never quote an input; it holds no input.
type report struct {
	Policies []policyReport `json:"policies"`
	Cases    []caseResult   `json:"cases"`
	Passed   int            `json:"passed"`
	Failed   int            `json:"failed"`
	// several is set when the policy file holds more than one policy: the table names each
	// case's policy.
	several bool
}

// policyReport is a policy and, when its rules cannot be published, why: each problem as its
// status would report it (spec.rules[2].when: …).
type policyReport struct {
	Name   string   `json:"name"`
	Errors []string `json:"errors,omitempty"`
}

type caseResult struct {
	Name    string      `json:"name"`
	Policy  string      `json:"policy"`
	Surface string      `json:"surface"`
	Expect  expectation `json:"expect"`
	Got     decision    `json:"got"`
	Pass    bool        `json:"pass"`
	// Mismatches say what differs from the expectation.
	Mismatches []string `json:"mismatches,omitempty"`
}

// decision is the part of a gate.Decision a case is checked against.
type decision struct {
	Verdict gate.Verdict `json:"verdict"`
	Rule    string       `json:"rule,omitempty"`
	Code    string       `json:"code,omitempty"`
	Reason  string       `json:"reason"`
	// Would is the Ask or Block of a rule (or defaultAction) in Audit: recorded, not enforced.
	Would *gate.AuditedVerdict `json:"would,omitempty"`
	// Layer and Exceptions are a layered decision's (see gate.Decision).
	Layer      string   `json:"layer,omitempty"`
	Exceptions []string `json:"exceptions,omitempty"`
}

// String is the verdict in effect, and the one recorded in Audit if any: "Allow (would Block)".
func (d decision) String() string {
	if d.Would == nil {
		return string(d.Verdict)
	}
	return fmt.Sprintf("%s (would %s)", d.Verdict, d.Would.Verdict)
}

func (r *report) heldBack() bool {
	for _, p := range r.Policies {
		if len(p.Errors) > 0 {
			return true
		}
	}
	return false
}

func (r *report) exitStatus() int {
	if r.heldBack() || r.Failed > 0 {
		return exitFail
	}
	return exitPass
}

// add checks a decision against its case's expectation.
func (r *report) add(c testCase, policy string, d gate.Decision) {
	res := caseResult{Name: c.Name, Policy: policy, Surface: c.Surface, Expect: c.Expect,
		Got: decision{Verdict: d.Verdict, Rule: d.Rule, Code: d.Code, Reason: d.Reason, Would: d.Would, Layer: d.Layer, Exceptions: d.Exceptions}}
	if d.Verdict != c.Expect.Verdict {
		res.Mismatches = append(res.Mismatches, fmt.Sprintf("verdict %s, got %s", c.Expect.Verdict, d.Verdict))
	}
	if want := c.Expect.Rule; want != nil && *want != d.Rule {
		res.Mismatches = append(res.Mismatches, fmt.Sprintf("rule %s, got %s", orNone(*want, "no rule"), orNone(d.Rule, "no rule")))
	}
	if want := c.Expect.Code; want != nil && *want != d.Code {
		res.Mismatches = append(res.Mismatches, fmt.Sprintf("code %s, got %s", orNone(*want, "no code"), orNone(d.Code, "no code")))
	}
	if want := c.Expect.Layer; want != nil && *want != d.Layer {
		res.Mismatches = append(res.Mismatches, fmt.Sprintf("layer %s, got %s", orNone(*want, "no layer"), orNone(d.Layer, "no layer")))
	}
	if want := c.Expect.Exceptions; want != nil && !slices.Equal(*want, d.Exceptions) {
		res.Mismatches = append(res.Mismatches, fmt.Sprintf("exceptions %v, got %v", *want, d.Exceptions))
	}
	res.Pass = len(res.Mismatches) == 0
	if res.Pass {
		r.Passed++
	} else {
		r.Failed++
	}
	r.Cases = append(r.Cases, res)
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

func (r *report) write(w io.Writer, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return r.writeTable(w)
}

// writeTable writes the compile errors of the policies that have them, or the table of cases,
// each failure explained under it, and a summary.
func (r *report) writeTable(w io.Writer) error {
	var b strings.Builder
	if r.heldBack() {
		for _, p := range r.Policies {
			if len(p.Errors) == 0 {
				continue
			}
			fmt.Fprintf(&b, "policy %s: its rules cannot be published, so the cluster would not put them in force:\n", p.Name)
			for _, e := range p.Errors {
				fmt.Fprintf(&b, "  %s\n", e)
			}
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	header := "CASE\tEXPECTED\tGOT\tRULE\tCODE\tRESULT"
	if r.several {
		header = "POLICY\t" + header
	}
	fmt.Fprintln(tw, header)
	for _, c := range r.Cases {
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", c.Name, c.Expect.Verdict, c.Got, orNone(c.Got.Rule, "-"), orNone(c.Got.Code, "-"), passFail(c.Pass))
		if r.several {
			row = c.Policy + "\t" + row
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Failed > 0 {
		b.WriteString("\n")
		for _, c := range r.Cases {
			if c.Pass {
				continue
			}
			fmt.Fprintf(&b, "FAIL %s: expected %s; the gate said %s", c.Name, strings.Join(c.Mismatches, "; "), c.Got.Verdict)
			if c.Got.Rule != "" {
				fmt.Fprintf(&b, " by rule %s", c.Got.Rule)
			}
			if c.Got.Code != "" {
				fmt.Fprintf(&b, " (%s)", c.Got.Code)
			}
			fmt.Fprintf(&b, ": %s", c.Got.Reason)
			if w := c.Got.Would; w != nil {
				fmt.Fprintf(&b, "; in Audit, it would %s", strings.ToLower(string(w.Verdict)))
				if w.Rule != "" {
					fmt.Fprintf(&b, " by rule %s", w.Rule)
				}
				fmt.Fprintf(&b, ": %s", w.Reason)
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "\n%d cases: %d passed, %d failed\n", len(r.Cases), r.Passed, r.Failed)
	_, err := io.WriteString(w, b.String())
	return err
}

func passFail(pass bool) string {
	if pass {
		return "PASS"
	}
	return "FAIL"
}
