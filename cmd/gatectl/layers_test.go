package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The shipped cluster baseline's cases pass: the baseline's Blocks hold against the tenant's
// policy, on the hook and without a pod, and the tenant's own Block adds to them.
func TestClusterBaselineCasesPass(t *testing.T) {
	policy := filepath.Join("..", "..", "docs", "examples", "cluster-baseline.yaml")
	cases := filepath.Join("..", "..", "docs", "examples", "cluster-baseline.cases.yaml")
	out, errOut, exit := gatectl(t, "test", "-f", policy, "-c", cases)
	if exit != exitPass || !strings.Contains(out, " 0 failed\n") {
		t.Fatalf("exit %d, want 0\n%s%s", exit, out, errOut)
	}
}

// layeredFile is a namespace policy in a namespace a cluster policy selects (by the file's
// Namespace), the cluster policy, and an exception of its no-curl rule expiring at expires.
func layeredFile(expires time.Time) string {
	return fmt.Sprintf(`apiVersion: gate.intutic.io/v1alpha1
kind: ClusterHarnessAgentPolicy
metadata: {name: baseline}
spec:
  namespaceSelector: {matchLabels: {tier: tenant}}
  exceptions:
    namespaceSelector: {matchLabels: {tier: tenant}}
    maxDuration: 2h
  rules:
  - {name: no-curl, tools: [Bash], when: 'input.command.startsWith("curl")', action: Block, reason: the platform forbids curl}
  - name: untrusted-asks
    tools: [Read]
    action: Ask
    reason: untrusted pods' reads need a human
---
apiVersion: gate.intutic.io/v1alpha1
kind: ClusterHarnessAgentPolicy
metadata: {name: untrusted}
spec:
  namespaceSelector: {matchLabels: {tier: tenant}}
  podSelector: {matchLabels: {trust: low}}
  rules:
  - {name: no-writes, tools: [Write], action: Block, reason: untrusted pods do not write}
---
apiVersion: gate.intutic.io/v1alpha1
kind: HarnessAgentPolicy
metadata: {name: agents, namespace: team-a}
spec:
  podSelector: {matchLabels: {gate.intutic.io/policy: agents}}
  rules:
  - {name: curl-ok, tools: [Bash], when: 'input.command.startsWith("curl")', action: Allow}
---
apiVersion: gate.intutic.io/v1alpha1
kind: GateException
metadata: {name: incident-7, namespace: team-a}
spec:
  policyRef: {kind: ClusterHarnessAgentPolicy, name: baseline}
  rules: [no-curl]
  tools: [Bash]
  podSelector: {matchLabels: {team: sre}}
  expiresAt: %q
  reason: fetching the incident's logs
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {tier: tenant}}
`, expires.UTC().Format(time.RFC3339))
}

const layeredCases = `cases:
- name: baseline-beats-the-namespace-allow
  tool: Bash
  input: {command: curl https://example.com}
  expect: {verdict: Block, rule: no-curl, layer: ClusterHarnessAgentPolicy/baseline}
- name: the-exception-lifts-it-for-its-pods
  tool: Bash
  input: {command: curl https://example.com}
  podLabels: {team: sre}
  expect: {verdict: Allow, exceptions: [incident-7]}
- name: a-pod-selector-chooses-the-layer
  tool: Write
  input: {file_path: /workspace/a, content: x}
  podLabels: {trust: low}
  expect: {verdict: Block, rule: no-writes, layer: ClusterHarnessAgentPolicy/untrusted}
- name: not-for-other-pods
  tool: Write
  input: {file_path: /workspace/a, content: x}
  expect: {verdict: Allow}
- name: no-pod-surfaces-get-every-layer
  tool: Write
  input: {file_path: /workspace/a, content: x}
  surface: api
  expect: {verdict: Block, layer: ClusterHarnessAgentPolicy/untrusted}
`

// TestClusterPoliciesAndExceptionsInCases: cases decide with the file's cluster policies, as
// the cluster would layer them (the Namespace's labels, the case's podLabels, every layer on a
// surface without a pod), and with its exceptions while they are active, naming them.
func TestClusterPoliciesAndExceptionsInCases(t *testing.T) {
	casesPath := writeFile(t, "cases.yaml", layeredCases)
	out, errOut, exit := gatectl(t, "test", "-f", writeFile(t, "policies.yaml", layeredFile(time.Now().Add(time.Hour))), "-c", casesPath)
	if exit != exitPass {
		t.Fatalf("exit %d, want 0\n%s%s", exit, out, errOut)
	}
	// Expired, the exception lifts nothing: that case, and only that one, fails.
	out, _, exit = gatectl(t, "test", "-f", writeFile(t, "policies.yaml", layeredFile(time.Now().Add(-time.Minute))), "-c", casesPath)
	if exit == exitPass || !strings.Contains(out, "5 cases: 4 passed, 1 failed") || !strings.Contains(out, "the-exception-lifts-it-for-its-pods") {
		t.Fatalf("with the exception expired: exit %d\n%s", exit, out)
	}
}
