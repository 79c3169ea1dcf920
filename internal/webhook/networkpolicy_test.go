package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/testutil"
)

// ceilingPolicy creates a cluster policy whose egress ceiling is 203.0.113.0/24 on TCP 443 in
// the namespaces labelled egress-ceiling-test: <its name>, over the pods pods selects.
func ceilingPolicy(ctx context.Context, t *testing.T, pods metav1.LabelSelector) *gatev1.ClusterHarnessAgentPolicy {
	t.Helper()
	name := "ceiling-" + rand.String(5)
	c := &gatev1.ClusterHarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gatev1.ClusterHarnessAgentPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"egress-ceiling-test": name}},
			PodSelector:       pods,
			Egress:            &gatev1.EgressSpec{AllowedCIDRs: []gatev1.CIDR{"203.0.113.0/24"}, Ports: []int32{443}},
		},
	}
	must(t, k8sClient.Create(ctx, c))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), c) })
	return c
}

// ceilingNamespace creates a namespace the cluster policy selects.
func ceilingNamespace(ctx context.Context, t *testing.T, c *gatev1.ClusterHarnessAgentPolicy) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ceiling-", Labels: c.Spec.NamespaceSelector.MatchLabels}}
	must(t, k8sClient.Create(ctx, ns))
	return ns.Name
}

// egressTo is a NetworkPolicy of the pods selected by pods, allowing cidr on TCP 443.
func egressTo(ns, name, cidr string, pods map[string]string) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: pods},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: new(intstr.FromInt32(443))}},
			}},
		},
	}
}

// refusedBeyond fails unless err is the NetworkPolicy webhook's refusal naming the ceiling's
// policy and saying each of want.
func refusedBeyond(t *testing.T, what string, err error, policy string, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: admitted", what)
		return
	}
	msg := err.Error()
	if !apierrors.IsForbidden(err) || !strings.Contains(msg, `admission webhook "networkpolicies.gate.intutic.io" denied the request`) ||
		!strings.Contains(msg, "beyond the egress ceiling of ClusterHarnessAgentPolicy "+policy) {
		t.Errorf("%s: refused with %v, want the NetworkPolicy webhook's refusal naming ClusterHarnessAgentPolicy %s", what, err, policy)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: the refusal %q does not say %q", what, msg, w)
		}
	}
}

// TestNetworkPolicyBeyondTheCeiling: in a namespace whose cluster policy sets an egress ceiling
// over every pod, a tenant NetworkPolicy opening 0.0.0.0/0 is refused at create and at update,
// naming the field and the cluster policy; one inside the ceiling is admitted, and so are the
// same wide one where no ceiling selects the namespace, one that allows no egress (ingress only,
// or egress rules under policyTypes [Ingress]), and the operator's own NetworkPolicy written by
// the manager.
func TestNetworkPolicyBeyondTheCeiling(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	c := ceilingPolicy(ctx, t, metav1.LabelSelector{})
	ns := ceilingNamespace(ctx, t, c)
	free := testutil.CreateNamespace(ctx, t, k8sClient, "no-ceiling-")

	err := k8sClient.Create(ctx, egressTo(ns, "open-all", "0.0.0.0/0", nil))
	refusedBeyond(t, "0.0.0.0/0 under the ceiling", err, c.Name,
		"spec.egress[0].to[0].ipBlock.cidr 0.0.0.0/0 is outside the ceiling of "+c.Name+", which allows 203.0.113.0/24")

	within := egressTo(ns, "api", "203.0.113.0/25", map[string]string{"app": "agent"})
	if err := k8sClient.Create(ctx, within); err != nil {
		t.Fatalf("a NetworkPolicy within the ceiling was refused: %v", err)
	}
	widened := within.DeepCopy()
	widened.Spec.Egress[0].To[0].IPBlock.CIDR = "0.0.0.0/0"
	refusedBeyond(t, "an update to 0.0.0.0/0", k8sClient.Update(ctx, widened), c.Name, "spec.egress[0].to[0].ipBlock.cidr 0.0.0.0/0")
	relabelled := within.DeepCopy()
	relabelled.Labels = map[string]string{"team": "a"}
	if err := k8sClient.Update(ctx, relabelled); err != nil {
		t.Errorf("a label change of a NetworkPolicy within the ceiling was refused: %v", err)
	}

	if err := k8sClient.Create(ctx, egressTo(free, "open-all", "0.0.0.0/0", nil)); err != nil {
		t.Errorf("0.0.0.0/0 where no ceiling selects the namespace was refused: %v", err)
	}

	ingressOnly := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ingress-only"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{}},
		},
	}
	if err := k8sClient.Create(ctx, ingressOnly); err != nil {
		t.Errorf("an ingress-only NetworkPolicy was refused: %v", err)
	}
	inert := egressTo(ns, "inert-egress", "0.0.0.0/0", nil)
	inert.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	if err := k8sClient.Create(ctx, inert); err != nil {
		t.Errorf("egress rules under policyTypes [Ingress], which allow nothing, were refused: %v", err)
	}

	// The manager writes its own NetworkPolicies (and only it may: managed-children.yaml).
	must(t, k8sClient.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "networkpolicy-writer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "create"}}},
	}))
	bind(ctx, t, ns, "Role", "networkpolicy-writer", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "gate-operator", Namespace: "gate-system"})
	child := egressTo(ns, "coding-agents-egress", "0.0.0.0/0", nil)
	child.Labels = map[string]string{gatev1.LabelManagedBy: gatev1.ManagedByValue}
	manager := as(t, managerServiceAccount, "")
	// RBAC reads the binding through an informer: retry while it is not seen yet.
	testutil.Eventually(t, 10*time.Second, func() error {
		err := manager.Create(ctx, child.DeepCopy())
		if err != nil && strings.Contains(err.Error(), "networkpolicies.gate.intutic.io") {
			t.Fatalf("the manager's own NetworkPolicy was judged: %v", err)
		}
		return err
	})
}

// TestNetworkPolicyJudgedForTheGovernedPods: a ceiling over some pods judges a NetworkPolicy
// only if it could select one of them: one that selects every pod, or a pod there now that
// both select; a NetworkPolicy of other pods is admitted however wide.
func TestNetworkPolicyJudgedForTheGovernedPods(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	c := ceilingPolicy(ctx, t, metav1.LabelSelector{MatchLabels: map[string]string{"tier": "sandbox"}})
	ns := ceilingNamespace(ctx, t, c)

	refusedBeyond(t, "0.0.0.0/0 for every pod", k8sClient.Create(ctx, egressTo(ns, "every-pod", "0.0.0.0/0", nil)), c.Name)
	web := egressTo(ns, "web", "0.0.0.0/0", map[string]string{"app": "web"})
	if err := k8sClient.Create(ctx, web.DeepCopy()); err != nil {
		t.Fatalf("0.0.0.0/0 for pods no ceiling governs was refused: %v", err)
	}
	must(t, k8sClient.Delete(ctx, web.DeepCopy()))

	pod := examplePod(t, "sandbox-pod-labelled.yaml", ns)
	pod.Labels = map[string]string{"app": "web", "tier": "sandbox"}
	must(t, k8sClient.Create(ctx, pod))
	refusedBeyond(t, "0.0.0.0/0 for app=web, with a governed app=web pod", k8sClient.Create(ctx, web.DeepCopy()), c.Name)
	if err := k8sClient.Create(ctx, egressTo(ns, "batch", "0.0.0.0/0", map[string]string{"app": "batch"})); err != nil {
		t.Errorf("0.0.0.0/0 for app=batch, which selects no governed pod, was refused: %v", err)
	}
}
