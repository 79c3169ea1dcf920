package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderWebhooksRefusesWhatTheChartCannotReproduce: a change to config/webhook/webhooks.yaml
// that the chart's templating would silently drop or get wrong stops `make chart-sync` with
// what to do, instead of generating a chart that differs from config/.
func TestRenderWebhooksRefusesWhatTheChartCannotReproduce(t *testing.T) {
	source, err := os.ReadFile(filepath.Join("..", "..", "config", "webhook", "webhooks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"a webhook with no scope", "name: sessionconfirmers.gate.intutic.io", "name: widgets.gate.intutic.io", "webhookScopes"},
		{"another Service", "name: gate-operator-webhook\n        namespace: gate-system\n        path: /mutate-pod", "name: elsewhere\n        namespace: gate-system\n        path: /mutate-pod", "served by Service gate-system/elsewhere"},
		{"a caBundle", "      service:\n        name: gate-operator-webhook\n        namespace: gate-system\n        path: /mutate-pod", "      caBundle: Zm9v\n      service:\n        name: gate-operator-webhook\n        namespace: gate-system\n        path: /mutate-pod", "clientConfig has [caBundle]"},
		{"two timeouts", "timeoutSeconds: 10", "timeoutSeconds: 5", "the chart has one webhook.timeoutSeconds"},
		{"another pod namespaceSelector", `values: ["gate-system", "kube-system"]`, `values: ["gate-system"]`, "want map[matchExpressions"},
		{"a namespaceSelector on a policy webhook", "    failurePolicy: Ignore\n", "    failurePolicy: Ignore\n    namespaceSelector: {matchLabels: {team: a}}\n", "namespaceSelector map[matchLabels"},
		{"an annotation", "  name: gate-operator\n", "  name: gate-operator\n  annotations: {a: b}\n", "metadata has [annotations]"},
		{"another name", "  name: gate-operator\n", "  name: gate\n", `does not start with "gate-operator"`},
		{"a Helm delimiter", "path: /mutate-pod", "path: /mutate-{{pod}}", "template delimiter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(source), tc.old) {
				t.Fatalf("config/webhook/webhooks.yaml no longer contains %q; update the test", tc.old)
			}
			config := t.TempDir()
			if err := os.Mkdir(filepath.Join(config, "webhook"), 0o755); err != nil {
				t.Fatal(err)
			}
			edited := strings.Replace(string(source), tc.old, tc.new, 1)
			if err := os.WriteFile(filepath.Join(config, "webhook", "webhooks.yaml"), []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := renderWebhooks(config, "webhook/webhooks.yaml")
			if err == nil {
				t.Fatalf("rendered:\n%s", out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// TestRenderWebhooksTemplatesTheRelease: in the generated configurations every Service,
// namespace and timeout is the release's, and each webhook's namespaces follow webhookScopes.
func TestRenderWebhooksTemplatesTheRelease(t *testing.T) {
	out, err := renderWebhooks(filepath.Join("..", "..", "config"), "webhook/webhooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, forbidden := range []string{"gate-system", "gate-operator-webhook", "timeoutSeconds: 10", "__"} {
		if strings.Contains(text, forbidden) {
			t.Errorf("the chart's webhooks still say %q:\n%s", forbidden, text)
		}
	}
	const watched = `(dict "Values" .Values "Release" .Release) | trim }}`
	const pods = `(dict "Values" .Values "Release" .Release "pods" true) | trim }}`
	for what, n := range map[string]int{
		"name: {{ $service }}":                10,
		"namespace: {{ .Release.Namespace }}": 10,
		"timeoutSeconds: {{ $timeout }}":      10,
		watched:                               2,
		pods:                                  1,
		`{{- include "gate-operator.governedNamespaceSelector" . | nindent 4 }}`: 2,
		"name: {{ include \"gate-operator.fullname\" . }}\n":                     2,
		"{{- if .Values.webhook.enabled }}":                                      1,
	} {
		if got := strings.Count(text, what); got != n {
			t.Errorf("%q appears %d times, want %d", what, got, n)
		}
	}
}

// TestRenderAdmissionPolicies: the admission policies of config/ are templated for the release:
// named for it, a binding's policyName with them, and a governed-namespaces selector replaced
// by the chart's; one the chart cannot reproduce is refused.
func TestRenderAdmissionPolicies(t *testing.T) {
	out, err := renderAdmissionPolicies(filepath.Join("..", "..", "config"), "admission-policies")
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, forbidden := range []string{"gate-system", "__", "name: gate-operator-", "policyName: gate-operator-"} {
		if strings.Contains(text, forbidden) {
			t.Errorf("the chart's admission policies still say %q:\n%s", forbidden, text)
		}
	}
	if n := strings.Count(text, `policyName: {{ include "gate-operator.fullname" . }}-`); n != strings.Count(text, "kind: ValidatingAdmissionPolicyBinding") || n == 0 {
		t.Errorf("%d bindings name their release's policy, of %d", n, strings.Count(text, "kind: ValidatingAdmissionPolicyBinding"))
	}
	// governed-pods, governed-pod-selectors and cluster-pod-selectors bind to the governed
	// namespaces.
	if n := strings.Count(text, `{{- include "gate-operator.governedNamespaceSelector" . | nindent`); n != 3 {
		t.Errorf("the governed-namespaces selector appears %d times, want 3", n)
	}
	// managed-children.yaml names the manager's user in its expression, message and
	// messageExpression.
	if n := strings.Count(text, `system:serviceaccount:{{ .Release.Namespace }}:{{ include "gate-operator.serviceAccountName" . }}`); n != 3 {
		t.Errorf("the release's manager user appears %d times, want 3", n)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "admission-policies"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: gate-operator-x}\nspec:\n  policyName: gate-operator-x\n  matchResources: {namespaceSelector: {matchLabels: {team: a}}}\n"
	if err := os.WriteFile(filepath.Join(dir, "admission-policies", "x.yaml"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := renderAdmissionPolicies(dir, "admission-policies"); err == nil || !strings.Contains(err.Error(), "the chart templates only") {
		t.Errorf("a binding with another namespaceSelector: %v", err)
	}
	for _, tc := range []struct{ name, user, want string }{
		{"another ServiceAccount of the operator's namespace", "system:serviceaccount:gate-system:other", `names "gate-system" other than in the manager's user`},
		{"a user that starts as the manager's", "system:serviceaccount:gate-system:gate-operator-old", "names the user system:serviceaccount:gate-system:gate-operator-..."},
		{"the operator's namespace alone", "gate-system", `names "gate-system"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: gate-operator-x}\nspec:\n  validations:\n  - expression: \"request.userInfo.username == '" + tc.user + "'\"\n"
			if err := os.WriteFile(filepath.Join(dir, "admission-policies", "x.yaml"), []byte(policy), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := renderAdmissionPolicies(dir, "admission-policies")
			if err == nil {
				t.Fatalf("rendered:\n%s", out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
