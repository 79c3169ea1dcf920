package v1alpha1_test

// These tests install the generated CRDs into a real kube-apiserver (envtest) and prove what
// the schema decides: samples are accepted, defaults are filled in, and every invalid object
// is rejected at admission with a message that names the field.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/testutil"
)

var k8sClient client.Client

func TestMain(m *testing.M) {
	os.Exit(apiservertest.Main(envtest.WebhookInstallOptions{}, func(env *envtest.Environment) int { return runWithAPIServer(m, env) }))
}

func runWithAPIServer(m *testing.M, env *envtest.Environment) int {
	scheme := runtime.NewScheme()
	if err := gatev1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var err error
	k8sClient, err = client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func TestSamplesAreAccepted(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	paths, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "gate_*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace agents: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(data, &obj.Object); err != nil {
				t.Fatalf("parse %s: %v", path, err)
			}
			if err := k8sClient.Create(ctx, obj); err != nil {
				t.Fatalf("the API server rejected %s: %v", path, err)
			}
		})
	}
}

func TestPolicyDefaults(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "schema-")
	minimal := &gatev1.HarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "minimal", Namespace: ns},
		Spec: gatev1.HarnessAgentPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Rules:       []gatev1.Rule{{Name: "everything", Action: gatev1.ActionAllow}},
		},
	}
	if err := k8sClient.Create(ctx, minimal); err != nil {
		t.Fatalf("create: %v", err)
	}
	got := &gatev1.HarnessAgentPolicy{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(minimal), got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Spec.PermissionMode != gatev1.PermissionModeAllowEdits {
		t.Errorf("permissionMode = %q, want %q", got.Spec.PermissionMode, gatev1.PermissionModeAllowEdits)
	}
	if got.Spec.FilterBash == nil || !*got.Spec.FilterBash {
		t.Errorf("filterBash = %v, want true", got.Spec.FilterBash)
	}
	if got.Spec.DefaultAction != gatev1.ActionAllow {
		t.Errorf("defaultAction = %q, want Allow", got.Spec.DefaultAction)
	}
	if got.Spec.FailurePolicy != gatev1.FailurePolicyFail {
		t.Errorf("failurePolicy = %q, want Fail", got.Spec.FailurePolicy)
	}
	if got.Spec.Enforcement != gatev1.EnforcementEnforce {
		t.Errorf("enforcement = %q, want Enforce", got.Spec.Enforcement)
	}
	if got.Spec.Rules[0].Enforcement != "" {
		t.Errorf("rules[0].enforcement = %q, want none (the policy's)", got.Spec.Rules[0].Enforcement)
	}
	if fmt.Sprint(got.Spec.Egress.Ports) != "[443]" {
		t.Errorf("egress.ports = %v, want [443]", got.Spec.Egress.Ports)
	}
}

func TestConfirmerDefaults(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "schema-")
	minimal := &gatev1.SessionConfirmer{
		ObjectMeta: metav1.ObjectMeta{Name: "minimal", Namespace: ns},
		Spec: gatev1.SessionConfirmerSpec{
			PolicyRef: gatev1.PolicyReference{Name: "coding-agents"},
			Anthropic: gatev1.AnthropicSpec{APIKeySecretRef: gatev1.SecretKeyReference{Name: "anthropic", Key: "api-key"}},
		},
	}
	if err := k8sClient.Create(ctx, minimal); err != nil {
		t.Fatalf("create: %v", err)
	}
	got := &gatev1.SessionConfirmer{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(minimal), got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Spec.Anthropic.BaseURL != "https://api.anthropic.com" {
		t.Errorf("anthropic.baseURL = %q, want https://api.anthropic.com", got.Spec.Anthropic.BaseURL)
	}
	if got.Spec.Sessions.PollInterval == nil || got.Spec.Sessions.PollInterval.Duration != 10*time.Second {
		t.Errorf("sessions.pollInterval = %v, want 10s", got.Spec.Sessions.PollInterval.Duration)
	}
	if got.Spec.HumanApproval.Deadline == nil || got.Spec.HumanApproval.Deadline.Duration != 15*time.Minute {
		t.Errorf("humanApproval.deadline = %v, want 15m", got.Spec.HumanApproval.Deadline.Duration)
	}
	if got.Spec.Replicas == nil || *got.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", got.Spec.Replicas)
	}
}

func validPolicy(ns string) *gatev1.HarnessAgentPolicy {
	return &gatev1.HarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: gatev1.HarnessAgentPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Rules: []gatev1.Rule{{
				Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.contains("rm -rf /")`,
				Action: gatev1.ActionBlock, Reason: "destructive", Code: "destructive_command",
			}},
			Egress: gatev1.EgressSpec{AllowedHosts: []gatev1.Hostname{"github.com"}, Ports: []int32{443}},
		},
	}
}

func validConfirmer(ns string) *gatev1.SessionConfirmer {
	return &gatev1.SessionConfirmer{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns},
		Spec: gatev1.SessionConfirmerSpec{
			PolicyRef: gatev1.PolicyReference{Name: "p"},
			Anthropic: gatev1.AnthropicSpec{APIKeySecretRef: gatev1.SecretKeyReference{Name: "anthropic", Key: "api-key"}},
		},
	}
}

// rejection is one invalid object: the API server must refuse it, naming field, with message.
type rejection struct {
	name    string
	field   string
	message string
}

// assertRejected creates obj with server-side dry-run and checks the refusal names the field
// and carries the message, as kubectl would show it.
func assertRejected(ctx context.Context, t *testing.T, obj client.Object, want rejection) {
	t.Helper()
	err := k8sClient.Create(ctx, obj, client.DryRunAll)
	if err == nil {
		t.Fatalf("the API server accepted the object; want a rejection of %s", want.field)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error, got %v", err)
	}
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil {
		t.Fatalf("no status details in %v", err)
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == want.field && strings.Contains(cause.Message, want.message) {
			return
		}
	}
	t.Fatalf("no cause on field %q with message containing %q; got: %v", want.field, want.message, err)
}

func TestPolicyValidPasses(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "schema-")
	if err := k8sClient.Create(ctx, validPolicy(ns), client.DryRunAll); err != nil {
		t.Fatalf("the base policy of the rejection table is itself rejected: %v", err)
	}
	audit := validPolicy(ns)
	audit.Spec.Enforcement = gatev1.EnforcementAudit
	audit.Spec.Rules[0].Enforcement = gatev1.EnforcementEnforce
	if err := k8sClient.Create(ctx, audit, client.DryRunAll); err != nil {
		t.Fatalf("a policy in Audit with a rule set to Enforce is rejected: %v", err)
	}
	masked := validPolicy(ns)
	masked.Spec.DecisionRecords = &gatev1.DecisionRecordsSpec{Input: &gatev1.RecordedInput{
		Erase: []gatev1.JSONPointer{"/content", "/edits/0/new_string"}, Hash: []gatev1.JSONPointer{"/command", "/a~1b~0c"}}}
	if err := k8sClient.Create(ctx, masked, client.DryRunAll); err != nil {
		t.Fatalf("a policy recording input with masks is rejected: %v", err)
	}
	if err := k8sClient.Create(ctx, validConfirmer(ns), client.DryRunAll); err != nil {
		t.Fatalf("the base confirmer of the rejection table is itself rejected: %v", err)
	}
}

func TestPolicyRejections(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "schema-")
	manyRules := make([]gatev1.Rule, 513)
	for i := range manyRules {
		manyRules[i] = gatev1.Rule{Name: fmt.Sprintf("r%d", i), Action: gatev1.ActionAllow}
	}
	cases := []struct {
		rejection
		mutate func(*gatev1.HarnessAgentPolicySpec)
	}{
		{rejection{"permissionMode allow-all", "spec.permissionMode", "allow-all is not permitted: it lets the agent run every tool without asking"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.PermissionMode = "allow-all" }},
		{rejection{"permissionMode unknown", "spec.permissionMode", "must be allow-reads or allow-edits"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.PermissionMode = "yolo" }},
		{rejection{"defaultAction unknown", "spec.defaultAction", `supported values: "Allow", "Ask", "Block"`},
			func(s *gatev1.HarnessAgentPolicySpec) { s.DefaultAction = "Deny" }},
		{rejection{"failurePolicy unknown", "spec.failurePolicy", `supported values: "Fail", "Ignore"`},
			func(s *gatev1.HarnessAgentPolicySpec) { s.FailurePolicy = "Open" }},
		{rejection{"rule action unknown", "spec.rules[0].action", `supported values: "Allow", "Ask", "Block"`},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Rules[0].Action = "Deny" }},
		{rejection{"enforcement unknown", "spec.enforcement", `supported values: "Enforce", "Audit"`},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Enforcement = "DryRun" }},
		{rejection{"rule enforcement unknown", "spec.rules[0].enforcement", `supported values: "Enforce", "Audit"`},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Rules[0].Enforcement = "audit" }},
		{rejection{"more than 512 rules", "spec.rules", "must have at most 512 items"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Rules = manyRules }},
		{rejection{"rules adding up to more than a ConfigMap holds", "spec.rules", "add up to more than 160 KiB"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Rules = rulesOfText(gatev1.MaxRulesTextBytes + 1) }},
		{rejection{"when longer than 4096", "spec.rules[0].when", "may not be more than 4096 bytes"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Rules[0].When = `"` + strings.Repeat("a", 4096) + `" != ""` }},
		{rejection{"rule name not a DNS label", "spec.rules[0].name", "must be a DNS label"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Rules[0].Name = "No_Root_RM" }},
		{rejection{"rule name too long", "spec.rules[0].name", "may not be more than 63 bytes"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Rules[0].Name = strings.Repeat("a", 64) }},
		{rejection{"duplicate rule names", "spec.rules[1]", "Duplicate value"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Rules = append(s.Rules, s.Rules[0]) }},
		{rejection{"block without reason", "spec.rules[0]", "reason is required when action is Ask or Block"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Rules[0].Reason = "" }},
		{rejection{"code not machine-readable", "spec.rules[0].code", "should match"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Rules[0].Code = "Destructive Command" }},
		{rejection{"approve and deny overlap", "spec.tools", "tools.approve and tools.deny must not name the same tool"},
			func(s *gatev1.HarnessAgentPolicySpec) {
				s.Tools = gatev1.StaticToolApprovals{Approve: []gatev1.ToolName{"deploy", "dropDatabase"}, Deny: []gatev1.ToolName{"dropDatabase"}}
			}},
		{rejection{"allowed CIDR invalid", "spec.egress.allowedCIDRs[0]", "must be a CIDR"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Egress.AllowedCIDRs = []gatev1.CIDR{"10.0.0.0/33"} }},
		{rejection{"denied CIDR is a bare address", "spec.egress.deniedCIDRs[0]", "must be a CIDR"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Egress.DeniedCIDRs = []gatev1.CIDR{"169.254.169.254"} }},
		{rejection{"host with scheme", "spec.egress.allowedHosts[0]", "must be a lower-case DNS name"},
			func(s *gatev1.HarnessAgentPolicySpec) {
				s.Egress.AllowedHosts = []gatev1.Hostname{"https://github.com"}
			}},
		{rejection{"host with port", "spec.egress.allowedHosts[0]", "must be a lower-case DNS name"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Egress.AllowedHosts = []gatev1.Hostname{"github.com:443"} }},
		{rejection{"host with path", "spec.egress.allowedHosts[0]", "must be a lower-case DNS name"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Egress.AllowedHosts = []gatev1.Hostname{"github.com/org"} }},
		{rejection{"wildcard host", "spec.egress.allowedHosts[0]", "must be a lower-case DNS name"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Egress.AllowedHosts = []gatev1.Hostname{"*.github.com"} }},
		{rejection{"IP address as host", "spec.egress.allowedHosts[0]", "is an IP address, not a host name"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Egress.AllowedHosts = []gatev1.Hostname{"140.82.112.3"} }},
		{rejection{"port out of range", "spec.egress.ports[0]", "should be less than or equal to 65535"},
			func(s *gatev1.HarnessAgentPolicySpec) { s.Egress.Ports = []int32{70000} }},
		{rejection{"input recorded without a mask", "spec.decisionRecords.input", "an input opt-in lists at least one mask"},
			func(s *gatev1.HarnessAgentPolicySpec) {
				s.DecisionRecords = &gatev1.DecisionRecordsSpec{Input: &gatev1.RecordedInput{}}
			}},
		{rejection{"mask not a JSON pointer", "spec.decisionRecords.input.erase[0]", "should match"},
			func(s *gatev1.HarnessAgentPolicySpec) {
				s.DecisionRecords = &gatev1.DecisionRecordsSpec{Input: &gatev1.RecordedInput{Erase: []gatev1.JSONPointer{"content"}}}
			}},
		{rejection{"mask with a bad escape", "spec.decisionRecords.input.hash[0]", "should match"},
			func(s *gatev1.HarnessAgentPolicySpec) {
				s.DecisionRecords = &gatev1.DecisionRecordsSpec{Input: &gatev1.RecordedInput{Hash: []gatev1.JSONPointer{"/a~2b"}}}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := validPolicy(ns)
			tc.mutate(&obj.Spec)
			assertRejected(ctx, t, obj, tc.rejection)
		})
	}
}

// rulesOfText returns Block rules whose names, tools, expressions and reasons add up to
// exactly n bytes (n at least 64).
func rulesOfText(n int) []gatev1.Rule {
	var rules []gatev1.Rule
	for i := 0; n > 0; i++ {
		r := gatev1.Rule{Name: fmt.Sprintf("r%d", i), Tools: []string{"bash"}, Action: gatev1.ActionBlock, Reason: "no"}
		fixed := len(r.Name) + len(r.Tools[0]) + len(r.Reason)
		// `"aaa" != ""` is 8 bytes around its run of a.
		when := min(4096, n-fixed)
		if rest := n - fixed - when; rest > 0 && rest < 64 {
			when -= 64 // leave the next rule room for its own fixed parts
		}
		r.When = `"` + strings.Repeat("a", when-8) + `" != ""`
		n -= fixed + when
		rules = append(rules, r)
	}
	return rules
}

// TestLargestRulesAccepted: the largest rules the size rule admits are accepted (the bundle
// test in internal/bootstrap shows that they fit in the bootstrap ConfigMap).
func TestLargestRulesAccepted(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	obj := validPolicy(testutil.CreateNamespace(ctx, t, k8sClient, "schema-"))
	obj.Spec.Rules = rulesOfText(gatev1.MaxRulesTextBytes)
	if err := k8sClient.Create(ctx, obj, client.DryRunAll); err != nil {
		t.Fatalf("rules of exactly %d bytes were refused: %v", gatev1.MaxRulesTextBytes, err)
	}
}

// TestRequiredFields sends objects the way kubectl would, with the field absent.
func TestRequiredFields(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "schema-")
	selector := map[string]any{"matchLabels": map[string]any{"app": "agent"}}
	cases := []struct {
		rejection
		kind string
		spec map[string]any
	}{
		{rejection{"policy podSelector", "spec.podSelector", "Required value"}, "HarnessAgentPolicy",
			map[string]any{"defaultAction": "Block"}},
		{rejection{"rule name", "spec.rules[0].name", "Required value"}, "HarnessAgentPolicy",
			map[string]any{"podSelector": selector, "rules": []any{map[string]any{"action": "Allow"}}}},
		{rejection{"rule action", "spec.rules[0].action", "Required value"}, "HarnessAgentPolicy",
			map[string]any{"podSelector": selector, "rules": []any{map[string]any{"name": "r"}}}},
		{rejection{"confirmer policyRef", "spec.policyRef", "Required value"}, "SessionConfirmer",
			map[string]any{"anthropic": map[string]any{"apiKeySecretRef": map[string]any{"name": "a", "key": "k"}}}},
		{rejection{"confirmer apiKeySecretRef", "spec.anthropic.apiKeySecretRef", "Required value"}, "SessionConfirmer",
			map[string]any{"policyRef": map[string]any{"name": "p"}, "anthropic": map[string]any{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": gatev1.GroupVersion.String(),
				"kind":       tc.kind,
				"metadata":   map[string]any{"name": "required", "namespace": ns},
				"spec":       tc.spec,
			}}
			assertRejected(ctx, t, obj, tc.rejection)
		})
	}
}

func TestConfirmerRejections(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "schema-")
	cases := []struct {
		rejection
		mutate func(*gatev1.SessionConfirmerSpec)
	}{
		{rejection{"policyRef name missing", "spec.policyRef.name", "should be at least 1 chars long"},
			func(s *gatev1.SessionConfirmerSpec) { s.PolicyRef.Name = "" }},
		{rejection{"api key secret name missing", "spec.anthropic.apiKeySecretRef.name", "should be at least 1 chars long"},
			func(s *gatev1.SessionConfirmerSpec) { s.Anthropic.APIKeySecretRef.Name = "" }},
		{rejection{"baseURL not a URL", "spec.anthropic.baseURL", "must be an http or https URL"},
			func(s *gatev1.SessionConfirmerSpec) { s.Anthropic.BaseURL = "api.anthropic.com" }},
		{rejection{"baseURL with another scheme", "spec.anthropic.baseURL", "must be an http or https URL"},
			func(s *gatev1.SessionConfirmerSpec) { s.Anthropic.BaseURL = "ftp://api.anthropic.com" }},
		{rejection{"pollInterval too short", "spec.sessions.pollInterval", "must be a duration between 1s and 1h"},
			func(s *gatev1.SessionConfirmerSpec) {
				s.Sessions.PollInterval = &metav1.Duration{Duration: 100 * time.Millisecond}
			}},
		{rejection{"deadline too long", "spec.humanApproval.deadline", "must be a duration between 10s and 24h"},
			func(s *gatev1.SessionConfirmerSpec) {
				s.HumanApproval.Deadline = &metav1.Duration{Duration: 48 * time.Hour}
			}},
		{rejection{"replicas zero", "spec.replicas", "should be greater than or equal to 1"},
			func(s *gatev1.SessionConfirmerSpec) { s.Replicas = ptr.To[int32](0) }},
		{rejection{"service account without namespace", "spec.gateAPI.allowedServiceAccounts[0]", "must be a ServiceAccount written namespace/name"},
			func(s *gatev1.SessionConfirmerSpec) {
				s.GateAPI.AllowedServiceAccounts = []gatev1.ServiceAccountName{"orchestrator"}
			}},
		{rejection{"webhook without signing key", "spec.webhook.signingKeySecretRef.key", "should be at least 1 chars long"},
			func(s *gatev1.SessionConfirmerSpec) {
				s.Webhook = &gatev1.WebhookSpec{SigningKeySecretRef: gatev1.SecretKeyReference{Name: "hook"}}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := validConfirmer(ns)
			tc.mutate(&obj.Spec)
			assertRejected(ctx, t, obj, tc.rejection)
		})
	}
}

func TestConfirmerDurationNotParsable(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "schema-")
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gatev1.GroupVersion.String(),
		"kind":       "SessionConfirmer",
		"metadata":   map[string]any{"name": "bad-duration", "namespace": ns},
		"spec": map[string]any{
			"policyRef":     map[string]any{"name": "p"},
			"anthropic":     map[string]any{"apiKeySecretRef": map[string]any{"name": "a", "key": "k"}},
			"humanApproval": map[string]any{"deadline": "fifteen minutes"},
		},
	}}
	err := k8sClient.Create(ctx, obj, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "spec.humanApproval.deadline") {
		t.Fatalf("want a rejection naming spec.humanApproval.deadline, got %v", err)
	}
}

// TestToolApprovalSchema: a new ToolApproval reads Pending (the API server defaults the status it
// drops on create), and its spec cannot change.
func TestToolApprovalSchema(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "schema-")
	ta := &gatev1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{Name: "web-fetch-0123456789", Namespace: ns},
		Spec: gatev1.ToolApprovalSpec{
			Surface: gatev1.SurfaceManagedAgents, Policy: "coding-agents", SessionID: "sesn_1", ToolUseID: "sevt_1", Tool: "web_fetch",
			Rule: "fetch-needs-human", Reason: "fetching from outside github.com needs a human",
			Input:     gatev1.ToolApprovalInput{Size: 2, SHA256: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
			ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second)),
		},
	}
	if err := k8sClient.Create(ctx, ta); err != nil {
		t.Fatalf("create: %v", err)
	}
	got := &gatev1.ToolApproval{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ta), got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Status.State != gatev1.ApprovalPending {
		t.Errorf("status.state of a new ToolApproval = %q, want Pending", got.Status.State)
	}
	got.Spec.Tool = "bash"
	if err := k8sClient.Update(ctx, got); err == nil || !strings.Contains(err.Error(), "spec is immutable") {
		t.Errorf("changing the spec: %v, want a refusal saying the spec is immutable", err)
	}
	bad := ta.DeepCopy()
	bad.ResourceVersion, bad.Name, bad.Spec.Input.SHA256 = "", "bad", "not-hex"
	if err := k8sClient.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "spec.input.sha256") {
		t.Errorf("a ToolApproval with a malformed sha256: %v, want a refusal naming spec.input.sha256", err)
	}
}
