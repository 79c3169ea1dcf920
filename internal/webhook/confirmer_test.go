package webhook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/testutil"
)

func sampleConfirmer(t *testing.T) *gatev1.SessionConfirmer {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "config", "samples", "gate_v1alpha1_sessionconfirmer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc := &gatev1.SessionConfirmer{}
	if err := yaml.UnmarshalStrict(b, sc); err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestConfirmerPolicyNamespace: a SessionConfirmer naming a policy in another namespace is
// refused at kubectl apply, naming spec.policyRef.namespace, unless it is in a platform
// namespace; naming its own namespace is the same as leaving the field empty.
func TestConfirmerPolicyNamespace(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	agents := testutil.CreateNamespace(ctx, t, k8sClient, "agents-")
	p := samplePolicy(t)
	p.Namespace = agents
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	team := testutil.CreateNamespace(ctx, t, k8sClient, "team-")
	sc := sampleConfirmer(t)
	sc.Namespace = team
	sc.Spec.PolicyRef = gatev1.PolicyReference{Namespace: agents, Name: p.Name}
	err := k8sClient.Create(ctx, sc.DeepCopy())
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Fatalf("a cross-namespace SessionConfirmer outside the platform namespaces: %v, want a refusal", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "spec.policyRef.namespace") || !strings.Contains(msg, testPlatformNamespace) {
		t.Errorf("the refusal does not name the field and the platform namespaces: %v", err)
	}

	// An update into another namespace is refused the same way.
	sc.Spec.PolicyRef = gatev1.PolicyReference{Name: p.Name}
	if err := k8sClient.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	sc.Spec.PolicyRef.Namespace = agents
	if err := k8sClient.Update(ctx, sc); err == nil || !strings.Contains(err.Error(), "spec.policyRef.namespace") {
		t.Errorf("an update naming another namespace: %v, want a refusal", err)
	}

	// Its own namespace, written out, is allowed.
	own := sampleConfirmer(t)
	own.Namespace, own.Name = team, "own"
	own.Spec.PolicyRef = gatev1.PolicyReference{Namespace: team, Name: p.Name}
	if err := k8sClient.Create(ctx, own); err != nil {
		t.Errorf("naming its own namespace: %v", err)
	}

	// From the platform namespace it is allowed, without a warning when the policy exists.
	if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testPlatformNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	platform := sampleConfirmer(t)
	platform.Namespace, platform.Name = testPlatformNamespace, agents
	platform.Spec.PolicyRef = gatev1.PolicyReference{Namespace: agents, Name: p.Name}
	warnings.Take()
	if err := k8sClient.Create(ctx, platform); err != nil {
		t.Fatalf("a cross-namespace SessionConfirmer in the platform namespace: %v", err)
	}
	if got := warnings.Take(); len(got) != 0 {
		t.Errorf("warnings %q for a policy that exists", got)
	}
	missing := sampleConfirmer(t)
	missing.Namespace, missing.Name = testPlatformNamespace, agents+"-missing"
	missing.Spec.PolicyRef = gatev1.PolicyReference{Namespace: agents, Name: "missing"}
	if err := k8sClient.Create(ctx, missing); err != nil {
		t.Fatal(err)
	}
	if got := warnings.Take(); len(got) != 1 || !strings.Contains(got[0], `there is no HarnessAgentPolicy "missing" in namespace `+agents) {
		t.Errorf("warnings %q, want one naming the missing policy in %s", got, agents)
	}
}
