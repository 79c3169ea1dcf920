package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/intutic/gate-operator/internal/gate"
)

// casesFile is the file of cases `gatectl test` decides (README, "Testing a policy before it
// ships", documents it).
type casesFile struct {
	Cases []testCase `json:"cases"`
}

// testCase is one tool call and the decision the policy must give it.
type testCase struct {
	Name string `json:"name"`
	// Policy names the policy (name or namespace/name) when the policy file holds several.
	Policy string `json:"policy,omitempty"`
	Tool   string `json:"tool"`
	Server string `json:"server,omitempty"`
	// Input is the tool input as a runtime sends it: an object, or a string of JSON text.
	Input   json.RawMessage `json:"input,omitempty"`
	Surface string          `json:"surface,omitempty"`
	Session string          `json:"session,omitempty"`
	// Cwd is the agent's working directory, as the hook reports it: the call's view resolves
	// relative paths against it.
	Cwd string `json:"cwd,omitempty"`
	// Caller is who makes the call, as the surface would tell the rules (caller.*); the
	// namespace, policy and session come from the policy and the case's session.
	Caller caseCaller `json:"caller"`
	// PodLabels are the labels of the hook's pod, which choose the cluster layers and the
	// exceptions with a pod selector that apply to the call (the hook surface only).
	PodLabels map[string]string `json:"podLabels,omitempty"`
	Expect    expectation       `json:"expect"`
}

// caseCaller is the part of the rules' caller a surface fills: the HTTP API's ServiceAccount
// (TokenReview), the hook's pod, the Managed Agents agent.
type caseCaller struct {
	ServiceAccount string `json:"serviceAccount,omitempty"`
	Pod            string `json:"pod,omitempty"`
	Agent          string `json:"agent,omitempty"`
}

// expectation is what a case asserts. Rule and Code are checked only when set; set to "", they
// assert that no rule decided (defaultAction or the gate's own refusal) or that there is no code.
type expectation struct {
	Verdict gate.Verdict `json:"verdict"`
	Rule    *string      `json:"rule,omitempty"`
	Code    *string      `json:"code,omitempty"`
	// Layer is the layer that decided (ClusterHarnessAgentPolicy/<name> or
	// HarnessAgentPolicy/<namespace>/<name>), checked when set; for a policy with layers.
	Layer *string `json:"layer,omitempty"`
	// Exceptions are the GateExceptions that changed the decision, checked when set ([] for none).
	Exceptions *[]string `json:"exceptions,omitempty"`
}

var surfaces = []string{gate.SurfaceHook, gate.SurfaceHarness, gate.SurfaceWorkflow, gate.SurfaceManagedAgents, gate.SurfaceAPI}

// loadCases reads a cases file strictly: unknown or duplicate fields are errors.
func loadCases(path string) ([]testCase, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cases, err := parseCases(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cases, nil
}

// parseCases decodes and checks a cases file; every problem is reported, each with its field.
func parseCases(data []byte) ([]testCase, error) {
	var f casesFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, err
	}
	if len(f.Cases) == 0 {
		return nil, errors.New("cases: no cases")
	}
	var problems []string
	names := map[string]int{}
	for i := range f.Cases {
		c := &f.Cases[i]
		at := fmt.Sprintf("cases[%d]", i)
		if c.Surface == "" {
			c.Surface = gate.SurfaceHook
		}
		switch {
		case c.Name == "":
			problems = append(problems, at+".name: required")
		case names[c.Name] > 0:
			problems = append(problems, fmt.Sprintf("%s.name: %q is also the name of cases[%d]", at, c.Name, names[c.Name]-1))
		default:
			names[c.Name] = i + 1
		}
		if c.Tool == "" {
			problems = append(problems, at+".tool: required")
		}
		if !slices.Contains(surfaces, c.Surface) {
			problems = append(problems, fmt.Sprintf("%s.surface: %q is not %s", at, c.Surface, strings.Join(surfaces, ", ")))
		}
		if sa := c.Caller.ServiceAccount; sa != "" {
			if ns, name, ok := strings.Cut(sa, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
				problems = append(problems, fmt.Sprintf("%s.caller.serviceAccount: %q is not namespace/name", at, sa))
			}
		}
		if v := c.Expect.Verdict; v != gate.Allow && v != gate.Ask && v != gate.Block {
			problems = append(problems, fmt.Sprintf("%s.expect.verdict: %q is not Allow, Ask or Block", at, v))
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return f.Cases, nil
}
