package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
)

func TestParseCases(t *testing.T) {
	cases, err := parseCases([]byte(`
cases:
- name: object-input
  tool: Bash
  input: {command: ls, timeout: 5}
  expect: {verdict: Allow}
- name: json-text-input
  tool: bash
  surface: harness
  session: s1
  input: '{"command": "ls"}'
  expect: {verdict: Block, rule: no-root-rm, code: destructive_command}
- name: no-input
  tool: release
  server: deploy
  surface: managed-agents
  expect: {verdict: Ask, rule: "", code: ""}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 3 {
		t.Fatalf("got %d cases", len(cases))
	}
	if cases[0].Surface != gate.SurfaceHook {
		t.Errorf("the default surface is hook, got %q", cases[0].Surface)
	}
	if cases[0].Expect.Rule != nil || cases[0].Expect.Code != nil {
		t.Errorf("an absent rule or code is not checked: %+v", cases[0].Expect)
	}
	if r, c := cases[2].Expect.Rule, cases[2].Expect.Code; r == nil || *r != "" || c == nil || *c != "" {
		t.Errorf(`rule: "" and code: "" assert no rule and no code: %+v`, cases[2].Expect)
	}

	// Inputs reach the gate as the surfaces render them: an object as is (numbers as float64,
	// as in JSON), JSON text parsed, no input as null.
	wantInputs := []map[string]any{
		{"command": "ls", "timeout": float64(5)},
		{"command": "ls"},
		{"args": []any{nil}},
	}
	for i, c := range cases {
		got, err := gate.RenderRawInput(c.Input)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if !equalJSON(got, wantInputs[i]) {
			t.Errorf("%s: input %v, want %v", c.Name, got, wantInputs[i])
		}
	}
}

func equalJSON(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			if !equalJSON(v, bm[k]) {
				return false
			}
		}
		return true
	case []any:
		bs, ok := b.([]any)
		return ok && slices.EqualFunc(a, bs, equalJSON)
	default:
		return a == b
	}
}

func TestParseCasesRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level field", "cases: []\ntests: []\n", []string{`unknown field "tests"`}},
		{"unknown case field", "cases:\n- {name: a, tool: Bash, verdict: Allow, expect: {verdict: Allow}}\n", []string{`unknown field "cases[0].verdict"`}},
		{"unknown expect field", "cases:\n- {name: a, tool: Bash, expect: {verdict: Allow, reason: x}}\n", []string{`unknown field "cases[0].expect.reason"`}},
		{"field names are case-sensitive", "cases:\n- {name: a, Tool: Bash, expect: {verdict: Allow}}\n", []string{`unknown field "cases[0].Tool"`}},
		{"duplicate field", "cases:\n- {name: a, name: b, tool: Bash, expect: {verdict: Allow}}\n", []string{`key "name" already set`}},
		{"a list, not an object", "- {name: a}\n", []string{"cannot unmarshal"}},
		{"no cases", "cases: []\n", []string{"no cases"}},
		{"bad verdict", "cases:\n- {name: a, tool: Bash, expect: {verdict: allow}}\n", []string{`cases[0].expect.verdict: "allow" is not Allow, Ask or Block`}},
		{"no verdict", "cases:\n- {name: a, tool: Bash, expect: {rule: x}}\n", []string{`cases[0].expect.verdict: "" is not`}},
		{"bad surface", "cases:\n- {name: a, tool: Bash, surface: cli, expect: {verdict: Allow}}\n", []string{`cases[0].surface: "cli" is not hook, harness, workflow, managed-agents, api`}},
		{"a caller's namespace comes from the policy", "cases:\n- {name: a, tool: Bash, caller: {namespace: kube-system}, expect: {verdict: Allow}}\n", []string{`unknown field "cases[0].caller.namespace"`}},
		{"a ServiceAccount without its namespace", "cases:\n- {name: a, tool: Bash, caller: {serviceAccount: orchestrator}, expect: {verdict: Allow}}\n", []string{`cases[0].caller.serviceAccount: "orchestrator" is not namespace/name`}},
		{"a ServiceAccount with too many parts", "cases:\n- {name: a, tool: Bash, caller: {serviceAccount: a/b/c}, expect: {verdict: Allow}}\n", []string{`"a/b/c" is not namespace/name`}},
		{"every problem at once", "cases:\n- {tool: Bash, expect: {verdict: Allow}}\n- {name: b, expect: {verdict: Allow}}\n- {name: b, tool: x, expect: {verdict: Allow}}\n", []string{
			"cases[0].name: required", "cases[1].tool: required", `cases[2].name: "b" is also the name of cases[1]`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseCases([]byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

// The cases file is outside input: whatever it holds, parsing returns cases the gate can
// decide or an error, and never panics.
func FuzzParseCases(f *testing.F) {
	f.Add([]byte("cases:\n- {name: a, tool: Bash, input: {command: ls}, expect: {verdict: Allow}}\n"))
	f.Add([]byte("cases:\n- {name: a, tool: x, input: '{\"a\": [1, 2]}', surface: api, expect: {verdict: Ask, rule: \"\"}}\n"))
	f.Add([]byte("cases: [{name: a, tool: b, input: [1, {c: null}], expect: {verdict: Block, code: x}}]"))
	f.Add([]byte("cases: {}"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cases, err := parseCases(data)
		if err != nil {
			return
		}
		for _, c := range cases {
			if c.Name == "" || c.Tool == "" || !slices.Contains(surfaces, c.Surface) {
				t.Fatalf("accepted an undecidable case %+v", c)
			}
			if v := c.Expect.Verdict; v != gate.Allow && v != gate.Ask && v != gate.Block {
				t.Fatalf("accepted verdict %q", v)
			}
		}
	})
}
