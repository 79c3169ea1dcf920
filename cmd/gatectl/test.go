package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
)

// testOptions are what `gatectl test` was asked to do.
type testOptions struct {
	policy, cases, output string
}

// testFlags are the flags of `gatectl test`. Parse errors are not printed by the flag package:
// runTest prints each error once.
func testFlags(o *testOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("gatectl test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, name := range []string{"f", "policy"} {
		fs.StringVar(&o.policy, name, "", "the HarnessAgentPolicy YAML file (several policies may be separated by ---)")
	}
	for _, name := range []string{"c", "cases"} {
		fs.StringVar(&o.cases, name, "", "the cases YAML file")
	}
	for _, name := range []string{"o", "output"} {
		fs.StringVar(&o.output, name, "table", "output format: table or json")
	}
	return fs
}

// parseTestArgs reads the arguments of `gatectl test`: flags may come before, between or after
// the two positional arguments (POLICY CASES), as in kubectl.
func parseTestArgs(fs *flag.FlagSet, o *testOptions, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	for _, p := range positional {
		switch {
		case o.policy == "":
			o.policy = p
		case o.cases == "":
			o.cases = p
		default:
			return fmt.Errorf("unexpected argument %q", p)
		}
	}
	switch {
	case o.policy == "":
		return errors.New("no policy file: pass -f POLICY.yaml")
	case o.cases == "":
		return errors.New("no cases file: pass -c CASES.yaml")
	case o.output != "table" && o.output != "json":
		return fmt.Errorf("-o %q is not table or json", o.output)
	}
	return nil
}

// runTest is `gatectl test`.
func runTest(args []string, stdout, stderr io.Writer) int {
	var o testOptions
	fs := testFlags(&o)
	err := parseTestArgs(fs, &o, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage+"\nFlags of gatectl test:\n")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return exitPass
	case err != nil:
		fmt.Fprintf(stderr, "gatectl test: %v\n(gatectl test -h lists the flags)\n", err)
		return exitUsage
	}
	rep, err := test(o)
	if err == nil {
		err = rep.write(stdout, o.output)
	}
	if err != nil {
		fmt.Fprintf(stderr, "gatectl test: %v\n", err)
		return exitUsage
	}
	return rep.exitStatus()
}

// test decides every case with its policy's gate. The error is for files that cannot be
// read or do not fit together; a policy whose rules do not compile is a report.
func test(o testOptions) (*report, error) {
	policies, err := loadPolicies(o.policy)
	if err != nil {
		return nil, err
	}
	cases, err := loadCases(o.cases)
	if err != nil {
		return nil, err
	}
	owners, err := casePolicies(policies, cases)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.cases, err)
	}
	rep := &report{Cases: []caseResult{}, several: len(policies) > 1}
	gates := map[*gatev1.HarnessAgentPolicy]*gate.Gate{}
	for _, p := range policies {
		g, pr, err := build(p)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", policyName(p), err)
		}
		rep.Policies = append(rep.Policies, pr)
		gates[p] = g
	}
	if rep.heldBack() {
		return rep, nil
	}
	for i, c := range cases {
		p := owners[i]
		rep.add(c, policyName(p), decide(gates[p], c))
	}
	return rep, nil
}

// casePolicies returns the policy of each case: the one it names, or the only one.
func casePolicies(policies []*gatev1.HarnessAgentPolicy, cases []testCase) ([]*gatev1.HarnessAgentPolicy, error) {
	owners := make([]*gatev1.HarnessAgentPolicy, len(cases))
	for i, c := range cases {
		if c.Policy == "" {
			if len(policies) > 1 {
				return nil, fmt.Errorf("cases[%d].policy: required, the policy file holds %d policies", i, len(policies))
			}
			owners[i] = policies[0]
			continue
		}
		for _, p := range policies {
			if c.Policy == p.Name || c.Policy == policyName(p) {
				if owners[i] != nil {
					return nil, fmt.Errorf("cases[%d].policy: %q names more than one policy; use namespace/name", i, c.Policy)
				}
				owners[i] = p
			}
		}
		if owners[i] == nil {
			return nil, fmt.Errorf("cases[%d].policy: no policy %q in the policy file", i, c.Policy)
		}
	}
	return owners, nil
}

// build compiles a policy exactly as the controller does (bootstrap.Build, with no bundle
// published before) and loads its snapshot into a gate exactly as the confirmer does. When
// the rules cannot be published, the report says why, field by field, as the policy's status
// would, and there is no gate.
func build(p *gatev1.HarnessAgentPolicy) (*gate.Gate, policyReport, error) {
	pr := policyReport{Name: policyName(p)}
	res, err := bootstrap.Build(p, bootstrap.Published{}, bootstrap.Options{})
	if err != nil {
		return nil, pr, err
	}
	for _, e := range res.CompileErrs {
		pr.Errors = append(pr.Errors, e.Error())
	}
	if res.RenderErr != nil {
		pr.Errors = append(pr.Errors, res.RenderErr.Error())
	}
	if res.HeldBack() {
		return nil, pr, nil
	}
	g := gate.New(p.Spec.WorkspaceID)
	if err := g.Load([]byte(res.Bundle.Data[bootstrap.KeySnapshot])); err != nil {
		return nil, pr, fmt.Errorf("the gate refuses the snapshot built from it: %w", err)
	}
	return g, pr, nil
}

// decide decides a case as the surfaces do: input that does not decode is refused with
// input_invalid, anything else goes to the gate.
func decide(g *gate.Gate, c testCase) gate.Decision {
	input, err := gate.RenderRawInput(c.Input)
	if err != nil {
		return gate.Refuse(gate.CodeInputInvalid, err.Error())
	}
	caller := gate.Caller{ServiceAccount: c.Caller.ServiceAccount, Pod: c.Caller.Pod, Agent: c.Caller.Agent}
	return g.Decide(&gate.Call{Tool: c.Tool, Server: c.Server, Input: input, Surface: c.Surface, Session: c.Session, Cwd: c.Cwd, Caller: caller})
}
