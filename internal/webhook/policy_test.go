package webhook

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/testutil"
)

// samplePolicy reads config/samples' HarnessAgentPolicy.
func samplePolicy(t *testing.T) *gatev1.HarnessAgentPolicy {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "config", "samples", "gate_v1alpha1_harnessagentpolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := &gatev1.HarnessAgentPolicy{}
	if err := yaml.UnmarshalStrict(b, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// policyWith returns a policy in ns with the given rules.
func policyWith(ns, name string, rules ...gatev1.Rule) *gatev1.HarnessAgentPolicy {
	return &gatev1.HarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gatev1.HarnessAgentPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{gatev1.LabelPolicy: name}},
			Rules:       rules,
		},
	}
}

// TestBrokenRuleRefusedWithFieldPath: kubectl apply of a policy whose rule does not compile, or
// does not type to bool, is refused by the API server, each problem at its field path with the
// message the RulesCompiled condition would carry.
func TestBrokenRuleRefusedWithFieldPath(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "broken-")
	p := policyWith(ns, "broken",
		gatev1.Rule{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.matches("rm\\s+-rf\\s+/")`, Action: gatev1.ActionBlock, Reason: "rm"},
		gatev1.Rule{Name: "fine", Tools: []string{"read"}, Action: gatev1.ActionAllow},
		gatev1.Rule{Name: "typo", Tools: []string{"read"}, When: `has(inptu.file_path)`, Action: gatev1.ActionBlock, Reason: "typo"},
		gatev1.Rule{Name: "not-a-bool", When: `size(input)`, Action: gatev1.ActionAsk, Reason: "x"},
	)

	// What the controller would write into RulesCompiled, from the same recipe.
	res, err := bootstrap.Build(p.DeepCopy(), bootstrap.Published{}, bootstrap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.CompileErrs) != 2 {
		t.Fatalf("the recipe finds %d problems, want 2: %v", len(res.CompileErrs), res.CompileErrs)
	}

	err = k8sClient.Create(ctx, p.DeepCopy())
	if err == nil {
		t.Fatal("the API server accepted a policy whose rules do not compile")
	}
	if !apierrors.IsInvalid(err) {
		t.Errorf("refused as %v, want Invalid (422)", apierrors.ReasonForError(err))
	}
	msg := err.Error()
	for _, e := range res.CompileErrs {
		if !strings.Contains(msg, e.Error()) {
			t.Errorf("the refusal does not carry %q as status would:\n%s", e.Error(), msg)
		}
	}
	for _, want := range []string{`admission webhook "harnessagentpolicies.gate.intutic.io" denied the request: spec.rules[2].when: `,
		"undeclared reference to 'inptu'", "spec.rules[3].when: must evaluate to bool"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, msg)
		}
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("not an API status: %v", err)
	}
	if d := status.Status().Details; d == nil || len(d.Causes) != 2 || d.Causes[0].Field != "spec.rules[2].when" || d.Causes[1].Field != "spec.rules[3].when" {
		t.Errorf("causes %+v, want one per problem at its field", d)
	}

	// Fixed, it is accepted; an update that breaks a rule is refused too.
	p.Spec.Rules = p.Spec.Rules[:2]
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatalf("the fixed policy is refused: %v", err)
	}
	p.Spec.Rules[0].When = `input.command.matches(`
	if err := k8sClient.Update(ctx, p); err == nil || !strings.Contains(err.Error(), "spec.rules[0].when: ") {
		t.Errorf("an update breaking spec.rules[0].when: %v", err)
	}
	// The sample is accepted.
	sample := samplePolicy(t)
	sample.Namespace = ns
	if err := k8sClient.Create(ctx, sample); err != nil {
		t.Fatalf("the sample policy is refused: %v", err)
	}
}

// TestPolicyWarnings: a policy that is legal but probably wrong is accepted with an admission
// warning for each problem; the sample draws none but the one about its Asks.
func TestPolicyWarnings(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "warnings-")

	p := samplePolicy(t)
	p.Namespace = ns
	warnings.Take()
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := warnings.Take()
	if len(got) > 1 || (len(got) == 1 && !strings.HasPrefix(got[0], "Ask in spec.rules[")) {
		t.Errorf("the sample policy drew %q, want at most the warning about its Asks under headless Claude Code", got)
	}

	p = policyWith(ns, "probably-wrong",
		gatev1.Rule{Name: "no-shell", Tools: []string{"bash", "PowerShell"}, Action: gatev1.ActionBlock, Reason: "no shell"},
		gatev1.Rule{Name: "rm-asks", Tools: []string{"Bash"}, When: `input.command.startsWith("rm")`, Action: gatev1.ActionAsk, Reason: "rm"},
		gatev1.Rule{Name: "typo", Tools: []string{"bsh", "deploy_service", "mcp__github__*", "web*"}, When: `surface == "hook"`, Action: gatev1.ActionBlock, Reason: "typo"},
		gatev1.Rule{Name: "audited-ask", Tools: []string{"Read"}, Action: gatev1.ActionAsk, Reason: "audit", Enforcement: gatev1.EnforcementAudit},
		gatev1.Rule{Name: "surface-ask", Tools: []string{"WebFetch"}, When: `surface != "hook"`, Action: gatev1.ActionAsk, Reason: "surface"},
		gatev1.Rule{Name: "after-all", Tools: []string{"PowerShell", "bash"}, Action: gatev1.ActionBlock, Reason: "again"},
	)
	p.Spec.Tools.Approve = []gatev1.ToolName{"deployService"}
	p.Spec.DefaultAction = gatev1.ActionAsk
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got = warnings.Take()
	want := []string{
		"spec.rules[1] (rm-asks) never decides: spec.rules[0] (no-shell), an enforced Block with no `when`, matches every call to its tools first",
		"spec.rules[5] (after-all) never decides: spec.rules[0] (no-shell)",
		`spec.rules[2].tools[0]: "bsh" is no built-in tool of Claude Code, @ai-sdk/harness or Managed Agents, and not in spec.tools`,
		"Ask in spec.rules[1] (rm-asks), spec.defaultAction: in a sandbox pod the hook hands the call to Claude Code's own permission flow, and headless Claude Code (-p, or the Agent SDK without canUseTool) has nobody to ask, so it denies the call",
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, w) }) {
			t.Errorf("no warning %q among:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d warnings, want %d (deploy_service is spec.tools' deployService, mcp__ and glob patterns are not judged, an audited Ask and an Ask on surface are meant):\n%s",
			len(got), len(want), strings.Join(got, "\n"))
	}
}

// TestPolicyUpdateOfAnInvalidSpec: a policy written while the webhook was down keeps taking
// updates that leave its spec alone (labels, finalizers, its deletion); one that changes the spec
// is judged.
func TestPolicyUpdateOfAnInvalidSpec(t *testing.T) {
	broken := policyWith("agents", "broken", gatev1.Rule{Name: "typo", When: "inptu", Action: gatev1.ActionAllow})
	relabelled := broken.DeepCopy()
	relabelled.Labels = map[string]string{"team": "platform"}
	v := &PolicyValidator{}

	resp := v.Handle(t.Context(), updateRequest(t, broken, relabelled))
	if !resp.Allowed {
		t.Errorf("a label on a policy whose rules never compiled is refused: %v", resp.Result)
	}
	edited := relabelled.DeepCopy()
	edited.Spec.DefaultAction = gatev1.ActionBlock
	resp = v.Handle(t.Context(), updateRequest(t, broken, edited))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "spec.rules[0].when: ") {
		t.Errorf("a spec change that keeps a broken rule: allowed %v, %v", resp.Allowed, resp.Result)
	}
}

func updateRequest(t *testing.T, old, obj runtime.Object) admission.Request {
	t.Helper()
	raw := func(o runtime.Object) runtime.RawExtension {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Update, Namespace: "agents", Object: raw(obj), OldObject: raw(old),
	}}
}

// TestConfirmerWarning: a SessionConfirmer whose policyRef names no policy is accepted with a
// warning saying so; one naming a policy that exists draws none.
func TestConfirmerWarning(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "confirmer-")
	b, err := os.ReadFile(filepath.Join(repoRoot, "config", "samples", "gate_v1alpha1_sessionconfirmer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc := &gatev1.SessionConfirmer{}
	if err := yaml.UnmarshalStrict(b, sc); err != nil {
		t.Fatal(err)
	}
	sc.Namespace = ns
	sc.Spec.PolicyRef.Name = "missing"
	warnings.Take()
	if err := k8sClient.Create(ctx, sc.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	got := warnings.Take()
	if len(got) != 1 || !strings.Contains(got[0], `spec.policyRef.name: there is no HarnessAgentPolicy "missing" in namespace `+ns) {
		t.Errorf("warnings %q, want one naming the missing policy", got)
	}

	p := samplePolicy(t)
	p.Namespace = ns
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	sc.Name = "resolved"
	sc.Spec.PolicyRef.Name = p.Name
	warnings.Take()
	if err := k8sClient.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if got := warnings.Take(); len(got) != 0 {
		t.Errorf("a SessionConfirmer naming an existing policy drew %q", got)
	}
}
