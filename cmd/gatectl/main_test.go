package main

// These tests run `gatectl test` as CI does, on the shipped sample and on files written for
// the case: its output and its exit status.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	samplePolicy = filepath.Join("..", "..", "config", "samples", "gate_v1alpha1_harnessagentpolicy.yaml")
	sampleCases  = filepath.Join("..", "..", "config", "samples", "cases", "gate_v1alpha1_harnessagentpolicy.cases.yaml")
)

// secret is in tool inputs; it must never appear in anything gatectl prints.
const secret = "sk-ant-SECRET-0123456789"

func gatectl(t *testing.T, args ...string) (stdout, stderr string, exit int) {
	t.Helper()
	var out, errOut bytes.Buffer
	exit = run(args, &out, &errOut)
	return out.String(), errOut.String(), exit
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The shipped cases pass against the shipped sample: this is what `make test` runs.
func TestSampleCasesPass(t *testing.T) {
	out, errOut, exit := gatectl(t, "test", "-f", samplePolicy, "-c", sampleCases)
	if exit != exitPass {
		t.Fatalf("exit %d, want 0\n%s%s", exit, out, errOut)
	}
	if !strings.Contains(out, " 0 failed\n") || strings.Contains(out, "FAIL") {
		t.Fatalf("want every case to pass:\n%s", out)
	}
	t.Log("\n" + out)
}

// Every rule of the sample decides at least one shipped case with its own action, and the
// default action decides one too, so a rule nobody tests cannot hide.
func TestSampleCasesCoverEveryRule(t *testing.T) {
	out, _, exit := gatectl(t, "test", "-o", "json", samplePolicy, sampleCases)
	if exit != exitPass {
		t.Fatalf("exit %d", exit)
	}
	var rep report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	f, err := loadPolicies(samplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	policies := f.policies
	decided := map[string]bool{}
	for _, c := range rep.Cases {
		if c.Got.Code != "rule_error" {
			decided[c.Got.Rule+"/"+string(c.Got.Verdict)] = true
		}
	}
	for _, r := range policies[0].Spec.Rules {
		if !decided[r.Name+"/"+string(r.Action)] {
			t.Errorf("no shipped case is decided by rule %s (%s)", r.Name, r.Action)
		}
	}
	if !decided["/"+string(policies[0].Spec.DefaultAction)] {
		t.Errorf("no shipped case is decided by the default action %s", policies[0].Spec.DefaultAction)
	}
}

func TestFailingCaseExitsOne(t *testing.T) {
	cases := writeFile(t, "cases.yaml", `
cases:
- name: rm-rf-root
  tool: Bash
  input: {command: "rm -rf / `+secret+`"}
  expect: {verdict: Block, rule: no-root-rm}
- name: wrong-verdict
  tool: Bash
  input: {command: "cat `+secret+`"}
  expect: {verdict: Block}
- name: wrong-rule-and-code
  tool: Write
  input: '{"file_path": "/etc/`+secret+`"}'
  expect: {verdict: Block, rule: no-root-rm, code: ""}
`)
	for _, format := range []string{"table", "json"} {
		out, errOut, exit := gatectl(t, "test", "-o", format, "-f", samplePolicy, "-c", cases)
		if exit != exitFail {
			t.Fatalf("-o %s: exit %d, want 1\n%s%s", format, exit, out, errOut)
		}
		if strings.Contains(out+errOut, secret) {
			t.Fatalf("-o %s: the output quotes a case's input:\n%s%s", format, out, errOut)
		}
		if format == "json" {
			continue
		}
		for _, want := range []string{
			"rm-rf-root ", "PASS",
			"FAIL wrong-verdict: expected verdict Block, got Allow; the gate said Allow: no rule matched",
			"FAIL wrong-rule-and-code: expected rule no-root-rm, got no-writes-outside-workspace; code no code, got write_outside_workspace",
			"3 cases: 1 passed, 2 failed",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the table lacks %q:\n%s", want, out)
			}
		}
	}
}

// A policy whose rules do not compile fails the run with each problem at its field path, as
// the policy's RulesCompiled condition would report it, and no case is decided.
func TestBrokenPolicyExitsOneWithFieldPaths(t *testing.T) {
	policy := writeFile(t, "policy.yaml", `apiVersion: gate.intutic.io/v1alpha1
kind: HarnessAgentPolicy
metadata: {name: broken, namespace: agents}
spec:
  podSelector: {}
  rules:
  - name: fine
    tools: [bash]
    when: 'input.command.contains("x")'
    action: Block
    reason: fine
  - name: bad-cel
    when: 'input.command.contains('
    action: Block
    reason: broken
  - name: bad-glob
    tools: ["[a-z0-9]"]
    action: Allow
`)
	cases := writeFile(t, "cases.yaml", "cases:\n- {name: one, tool: Bash, input: {command: ls}, expect: {verdict: Allow}}\n")
	out, errOut, exit := gatectl(t, "test", "-f", policy, "-c", cases)
	if exit != exitFail {
		t.Fatalf("exit %d, want 1\n%s%s", exit, out, errOut)
	}
	for _, want := range []string{"policy agents/broken: its rules cannot be published", "\n  spec.rules[1].when: ", "\n  spec.rules[2].tools[0]: "} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "PASS") || strings.Contains(out, "spec.rules[0]") {
		t.Errorf("only the broken rules are reported, and no case is decided:\n%s", out)
	}
}

func TestUsageAndInputErrorsExitTwo(t *testing.T) {
	goodCases := writeFile(t, "cases.yaml", "cases:\n- {name: one, tool: Bash, input: {command: ls}, expect: {verdict: Allow}}\n")
	unknownField := writeFile(t, "cases.yaml", "cases:\n- {name: one, tool: Bash, inputs: {command: ls}, expect: {verdict: Allow}}\n")
	badVerdict := writeFile(t, "cases.yaml", "cases:\n- {name: one, tool: Bash, expect: {verdict: Deny}}\n")
	otherPolicy := writeFile(t, "cases.yaml", "cases:\n- {name: one, policy: nobody, tool: Bash, expect: {verdict: Allow}}\n")
	policyUnknownField := writeFile(t, "policy.yaml", "apiVersion: gate.intutic.io/v1alpha1\nkind: HarnessAgentPolicy\nmetadata: {name: p}\nspec: {podSelector: {}, defaultActoin: Block}\n")
	notAPolicy := writeFile(t, "policy.yaml", "apiVersion: gate.intutic.io/v1alpha1\nkind: SessionConfirmer\nmetadata: {name: p}\nspec: {}\n")
	noName := writeFile(t, "policy.yaml", "apiVersion: gate.intutic.io/v1alpha1\nkind: HarnessAgentPolicy\nspec: {podSelector: {}}\n")
	empty := writeFile(t, "policy.yaml", "# nothing\n---\n")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "Usage:"},
		{"unknown command", []string{"verify"}, `unknown command "verify"`},
		{"no files", []string{"test"}, "no policy file"},
		{"no cases file", []string{"test", "-f", samplePolicy}, "no cases file"},
		{"unknown flag", []string{"test", "--policy-file", samplePolicy}, "flag provided but not defined"},
		{"bad output", []string{"test", "-o", "yaml", samplePolicy, goodCases}, `-o "yaml" is not table or json`},
		{"extra argument", []string{"test", samplePolicy, goodCases, goodCases}, "unexpected argument"},
		{"missing policy file", []string{"test", "nope.yaml", goodCases}, "nope.yaml"},
		{"missing cases file", []string{"test", samplePolicy, "nope.yaml"}, "nope.yaml"},
		{"unknown case field", []string{"test", samplePolicy, unknownField}, `unknown field "cases[0].inputs"`},
		{"bad verdict", []string{"test", samplePolicy, badVerdict}, `cases[0].expect.verdict: "Deny" is not Allow, Ask or Block`},
		{"unknown policy", []string{"test", samplePolicy, otherPolicy}, `cases[0].policy: no policy "nobody"`},
		{"unknown policy field", []string{"test", policyUnknownField, goodCases}, `unknown field "spec.defaultActoin"`},
		{"not a policy", []string{"test", notAPolicy, goodCases}, `kind "SessionConfirmer" is not a HarnessAgentPolicy`},
		{"policy without a name", []string{"test", noName, goodCases}, "metadata.name is required"},
		{"no policy in the file", []string{"test", empty, goodCases}, "holds no HarnessAgentPolicy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, exit := gatectl(t, tc.args...)
			if exit != exitUsage {
				t.Fatalf("exit %d, want 2\n%s%s", exit, out, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Fatalf("stderr lacks %q:\n%s", tc.want, errOut)
			}
			if out != "" {
				t.Fatalf("nothing is reported on stdout on a usage error, got:\n%s", out)
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"test", "-h"}} {
		if _, _, exit := gatectl(t, args...); exit != exitPass {
			t.Errorf("%v: exit %d, want 0", args, exit)
		}
	}
}

// Several policies in one file (documents separated by ---): each case names its policy, and
// each is decided by its own.
func TestSeveralPolicies(t *testing.T) {
	policies := writeFile(t, "policies.yaml", `apiVersion: gate.intutic.io/v1alpha1
kind: HarnessAgentPolicy
metadata: {name: strict, namespace: agents}
spec:
  podSelector: {}
  defaultAction: Block
---
apiVersion: gate.intutic.io/v1alpha1
kind: HarnessAgentPolicy
metadata: {name: lenient, namespace: agents}
spec:
  podSelector: {}
---
`)
	cases := writeFile(t, "cases.yaml", `cases:
- {name: strict-blocks, policy: agents/strict, tool: Bash, input: {command: ls}, expect: {verdict: Block, rule: "", code: default_action}}
- {name: lenient-allows, policy: lenient, tool: Bash, input: {command: ls}, expect: {verdict: Allow, rule: ""}}
`)
	out, errOut, exit := gatectl(t, "test", policies, cases, "-o", "table")
	if exit != exitPass {
		t.Fatalf("exit %d\n%s%s", exit, out, errOut)
	}
	if !strings.HasPrefix(out, "POLICY ") || !strings.Contains(out, "agents/strict ") {
		t.Fatalf("the table names each case's policy:\n%s", out)
	}

	unnamed := writeFile(t, "cases.yaml", "cases:\n- {name: one, tool: Bash, expect: {verdict: Allow}}\n")
	if _, errOut, exit := gatectl(t, "test", policies, unnamed); exit != exitUsage || !strings.Contains(errOut, "cases[0].policy: required") {
		t.Fatalf("a case must name its policy among several: exit %d\n%s", exit, errOut)
	}
}

// The policy is decided with the CRD's defaults: a policy that sets none still blocks on a
// rule that cannot evaluate (failurePolicy Fail) and allows what no rule matches.
func TestDefaultsApply(t *testing.T) {
	policy := writeFile(t, "policy.yaml", `apiVersion: gate.intutic.io/v1alpha1
kind: HarnessAgentPolicy
metadata: {name: bare}
spec:
  podSelector: {}
  rules:
  - {name: needs-command, tools: [bash], when: 'input.command == "x"', action: Block, reason: x}
`)
	cases := writeFile(t, "cases.yaml", `cases:
- {name: errors-block, tool: Bash, input: {}, expect: {verdict: Block, rule: needs-command, code: rule_error}}
- {name: default-allows, tool: Read, input: {}, expect: {verdict: Allow, rule: "", code: ""}}
`)
	if out, errOut, exit := gatectl(t, "test", "-f", policy, "-c", cases); exit != exitPass {
		t.Fatalf("exit %d\n%s%s", exit, out, errOut)
	}
}

// A policy in Audit lets through what its rules would block: the case gets the verdict in
// effect, and the table says what was recorded. The working directory reaches the call's view.
func TestAuditAndWorkingDirectory(t *testing.T) {
	policy := writeFile(t, "policy.yaml", `apiVersion: gate.intutic.io/v1alpha1
kind: HarnessAgentPolicy
metadata: {name: trial}
spec:
  podSelector: {}
  enforcement: Audit
  rules:
  - {name: no-rm, tools: [bash], when: 'input.command.startsWith("rm ")', action: Block, reason: no rm}
  - {name: home-only, when: 'call.cwd != "" && call.cwd != "/workspace"', action: Block, reason: outside the workspace, enforcement: Enforce}
`)
	cases := writeFile(t, "cases.yaml", `cases:
- {name: audited, tool: Bash, input: {command: rm x}, expect: {verdict: Block}}
- {name: cwd-outside, tool: Bash, cwd: /tmp, input: {command: ls}, expect: {verdict: Block, rule: home-only}}
- {name: cwd-inside, tool: Bash, cwd: /workspace, input: {command: ls}, expect: {verdict: Allow, rule: ""}}
`)
	out, errOut, exit := gatectl(t, "test", policy, cases)
	if exit != exitFail {
		t.Fatalf("exit %d, want 1\n%s%s", exit, out, errOut)
	}
	for _, want := range []string{"Allow (would Block)", "FAIL audited: expected verdict Block, got Allow; the gate said Allow", "; in Audit, it would block by rule no-rm: no rm\n", "3 cases: 2 passed, 1 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}

// A case's caller reaches the rules as the surface would tell them, beside the namespace and
// name of the policy the case runs under and the case's session.
func TestCaseCaller(t *testing.T) {
	policy := writeFile(t, "policy.yaml", `apiVersion: gate.intutic.io/v1alpha1
kind: HarnessAgentPolicy
metadata: {name: trial, namespace: team-a}
spec:
  podSelector: {}
  rules:
  - name: who
    when: >-
      caller.namespace + "|" + caller.policy + "|" + caller.serviceAccount + "|" + caller.pod
      + "|" + caller.agent + "|" + caller.session == "team-a|trial|team-a/ci|web-0|agent_1|s1"
    action: Block
    reason: everyone named
  - {name: nobody, when: 'caller.serviceAccount == "" && caller.pod == "" && caller.agent == ""', action: Ask, reason: nobody named}
`)
	cases := writeFile(t, "cases.yaml", `cases:
- name: named
  tool: Bash
  session: s1
  caller: {serviceAccount: team-a/ci, pod: web-0, agent: agent_1}
  expect: {verdict: Block, rule: who}
- {name: unnamed, tool: Bash, expect: {verdict: Ask, rule: nobody}}
`)
	out, errOut, exit := gatectl(t, "test", policy, cases)
	if exit != exitPass {
		t.Fatalf("exit %d\n%s%s", exit, out, errOut)
	}
}
