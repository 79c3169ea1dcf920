package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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
	f, err := loadPolicies(o.policy)
	if err != nil {
		return nil, err
	}
	cases, err := loadCases(o.cases)
	if err != nil {
		return nil, err
	}
	owners, err := casePolicies(f.policies, cases)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.cases, err)
	}
	rep := &report{Cases: []caseResult{}, several: len(f.policies) > 1}
	built := map[*gatev1.HarnessAgentPolicy]*builtPolicy{}
	now := time.Now()
	for _, p := range f.policies {
		b, pr, err := build(p, f, now)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", policyName(p), err)
		}
		rep.Policies = append(rep.Policies, pr)
		built[p] = b
	}
	if rep.heldBack() {
		return rep, nil
	}
	for i, c := range cases {
		p := owners[i]
		rep.add(c, policyName(p), built[p].decide(c))
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

// builtPolicy is what a policy's cases are decided with: its gate, or for a policy whose
// bundle carries layers (cluster policies selecting its namespace, exceptions), the bundle's
// index and snapshots, from which each case's layers are chosen as its pod's hook would choose
// them (the case's podLabels), or all of them on the surfaces without a pod.
type builtPolicy struct {
	g       *gate.Gate
	idx     *gate.LayersIndex
	primary *gate.Snapshot
	layers  map[string]*gate.Snapshot
}

// build compiles a policy exactly as the controller does (bootstrap.BuildLayered, with no
// bundle published before, the file's cluster policies that select its namespace and the
// file's exceptions that are active at now) and loads its bundle as the hook and the confirmer
// do. When the rules cannot be published, the report says why, field by field, as the
// policy's status would, and there is nothing to decide with.
func build(p *gatev1.HarnessAgentPolicy, f *policyFile, now time.Time) (*builtPolicy, policyReport, error) {
	pr := policyReport{Name: policyName(p)}
	layers, err := layersFor(p, f, now)
	if err != nil {
		return nil, pr, err
	}
	res, err := bootstrap.BuildLayered(p, layers, bootstrap.Published{}, bootstrap.Options{})
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
	data := res.Bundle.Data
	if raw, ok := data[gate.LayersFileName]; ok {
		b := &builtPolicy{layers: map[string]*gate.Snapshot{}}
		if b.idx, err = gate.LoadLayersIndex([]byte(raw), p.Spec.WorkspaceID); err != nil {
			return nil, pr, fmt.Errorf("the gate refuses the layers index built from it: %w", err)
		}
		if b.primary, err = gate.LoadSnapshot([]byte(data[bootstrap.KeySnapshot]), p.Spec.WorkspaceID); err != nil {
			return nil, pr, fmt.Errorf("the gate refuses the snapshot built from it: %w", err)
		}
		for _, l := range b.idx.Layers {
			if b.layers[l.Name], err = gate.LoadSnapshot([]byte(data[l.File]), p.Spec.WorkspaceID); err != nil {
				return nil, pr, fmt.Errorf("the gate refuses the snapshot of cluster layer %s: %w", l.Name, err)
			}
		}
		return b, pr, nil
	}
	g := gate.New(p.Spec.WorkspaceID)
	if err := g.Load([]byte(data[bootstrap.KeySnapshot])); err != nil {
		return nil, pr, fmt.Errorf("the gate refuses the snapshot built from it: %w", err)
	}
	return &builtPolicy{g: g}, pr, nil
}

// layersFor is what the controller would layer the policy's bundle with: the file's cluster
// policies whose namespaceSelector selects its namespace (by the file's Namespace labels), and
// the file's exceptions of its namespace active at now, as if each had just been applied.
func layersFor(p *gatev1.HarnessAgentPolicy, f *policyFile, now time.Time) (bootstrap.Layers, error) {
	var items []gatev1.GateException
	for _, e := range f.exceptions {
		if e.Namespace == p.Namespace {
			e := e.DeepCopy()
			if e.Annotations == nil {
				e.Annotations = map[string]string{}
			}
			e.Annotations[gatev1.AnnotationRequestedAt] = now.UTC().Format(time.RFC3339) // as the webhook records an apply
			items = append(items, *e)
		}
	}
	var out bootstrap.Layers
	var err error
	if out.Exceptions, _, err = bootstrap.ActiveExceptions(items, gatev1.ExceptionOfNamespacePolicy, p.Name, bootstrap.ExceptionTarget{Namespace: p}, now); err != nil {
		return out, err
	}
	nsLabels := f.labelsOf(p.Namespace)
	for _, c := range f.cluster {
		sel, err := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector)
		if err != nil {
			return out, fmt.Errorf("ClusterHarnessAgentPolicy %s: spec.namespaceSelector: %w", c.Name, err)
		}
		if !sel.Matches(labels.Set(nsLabels)) {
			continue
		}
		l, errs, err := bootstrap.ClusterLayerOf(c, p.Spec.WorkspaceID)
		if err != nil {
			return out, fmt.Errorf("ClusterHarnessAgentPolicy %s: %w", c.Name, err)
		}
		if len(errs) > 0 {
			return out, fmt.Errorf("ClusterHarnessAgentPolicy %s: %w", c.Name, errs)
		}
		if l.Exceptions, _, err = bootstrap.ActiveExceptions(items, gatev1.ExceptionOfClusterPolicy, c.Name, bootstrap.ExceptionTarget{Cluster: c, NamespaceLabels: nsLabels}, now); err != nil {
			return out, err
		}
		out.Cluster = append(out.Cluster, l)
	}
	return out, nil
}

// decide decides a case as the surfaces do: input that does not decode is refused with
// input_invalid, anything else goes to the gate: a layered policy's layers as the case's pod
// (its podLabels) selects them on the hook, all of them on the surfaces without a pod.
func (b *builtPolicy) decide(c testCase) gate.Decision {
	input, err := gate.RenderRawInput(c.Input)
	if err != nil {
		return gate.Refuse(gate.CodeInputInvalid, err.Error())
	}
	caller := gate.Caller{ServiceAccount: c.Caller.ServiceAccount, Pod: c.Caller.Pod, Agent: c.Caller.Agent}
	call := &gate.Call{Tool: c.Tool, Server: c.Server, Input: input, Surface: c.Surface, Session: c.Session, Cwd: c.Cwd, Caller: caller}
	if b.g != nil {
		return b.g.Decide(call)
	}
	var set *gate.LayerSet
	if c.Surface == gate.SurfaceHook {
		set, err = gate.NewLayerSet(b.idx, b.primary, b.layers, c.PodLabels)
	} else {
		set, err = gate.NewLayerSetNoPod(b.idx, b.primary, b.layers)
	}
	if err != nil {
		se := &gate.SnapshotError{Code: gate.CodeSnapshotCorrupt, Reason: err.Error()}
		errors.As(err, &se)
		return gate.Refuse(se.Code, se.Reason)
	}
	return set.Compile().Decide(call)
}
