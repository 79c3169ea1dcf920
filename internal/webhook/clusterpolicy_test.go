package webhook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestClusterPolicyValidation: kubectl apply of a cluster policy whose rules do not compile, or
// whose selector cannot be evaluated, is refused at the field; a valid one is admitted, and so
// is a metadata change of one, whatever its spec.
func TestClusterPolicyValidation(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	base := func(name string, rules ...gatev1.Rule) *gatev1.ClusterHarnessAgentPolicy {
		return &gatev1.ClusterHarnessAgentPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: gatev1.ClusterHarnessAgentPolicySpec{
				NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"webhook-test": name}},
				Rules:             rules,
			},
		}
	}
	typo := base("chap-typo",
		gatev1.Rule{Name: "fine", Tools: []string{"bash"}, When: `input.command.startsWith("rm")`, Action: gatev1.ActionBlock, Reason: "rm"},
		gatev1.Rule{Name: "typo", When: `has(inptu.file_path)`, Action: gatev1.ActionBlock, Reason: "typo"})
	err := k8sClient.Create(ctx, typo)
	if err == nil || !apierrors.IsInvalid(err) {
		t.Fatalf("a cluster policy whose rule does not compile: %v, want Invalid", err)
	}
	if !strings.Contains(err.Error(), "spec.rules[1].when") {
		t.Errorf("the refusal does not name the field: %v", err)
	}

	badSelector := base("chap-selector")
	badSelector.Spec.PodSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near", Values: []string{"x"}}}}
	err = k8sClient.Create(ctx, badSelector)
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.podSelector") {
		t.Fatalf("a cluster policy with an operator apimachinery refuses: %v, want Invalid at spec.podSelector", err)
	}

	good := base("chap-good", gatev1.Rule{Name: "no-rm", Tools: []string{"bash"}, When: `input.command.startsWith("rm")`, Action: gatev1.ActionBlock, Reason: "rm"})
	if err := k8sClient.Create(ctx, good); err != nil {
		t.Fatalf("a valid cluster policy was refused: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, good) })
	good.Labels = map[string]string{"team": "platform"}
	if err := k8sClient.Update(ctx, good); err != nil {
		t.Fatalf("a metadata change was refused: %v", err)
	}
	good.Spec.Rules[0].When = `input.command.startsWith(`
	if err := k8sClient.Update(ctx, good); err == nil || !apierrors.IsInvalid(err) {
		t.Fatalf("an update to rules that do not compile: %v, want Invalid", err)
	}
}

// TestClusterBaselineExampleIsAdmitted: both objects of docs/examples/cluster-baseline.yaml
// pass their webhooks as written.
func TestClusterBaselineExampleIsAdmitted(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	f, err := os.Open(filepath.Join(repoRoot, "docs", "examples", "cluster-baseline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	c := &gatev1.ClusterHarnessAgentPolicy{}
	if err := dec.Decode(c); err != nil {
		t.Fatal(err)
	}
	p := &gatev1.HarnessAgentPolicy{}
	if err := dec.Decode(p); err != nil {
		t.Fatal(err)
	}
	c.Spec.NamespaceSelector = metav1.LabelSelector{MatchLabels: map[string]string{"webhook-test": "baseline"}} // select nothing of the other tests
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatalf("the example's cluster policy was refused: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, c) })
	p.Namespace = testutil.CreateNamespace(ctx, t, k8sClient, "baseline-")
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatalf("the example's tenant policy was refused: %v", err)
	}
}
