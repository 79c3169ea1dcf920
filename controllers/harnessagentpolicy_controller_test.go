package controllers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/golden"
	"github.com/intutic/gate-operator/internal/testutil"
)

func newPolicy(ns, name string) *gatev1.HarnessAgentPolicy {
	return &gatev1.HarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gatev1.HarnessAgentPolicySpec{
			WorkspaceID: "ws_123",
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{gatev1.LabelPolicy: name}},
			Tools:       gatev1.StaticToolApprovals{Approve: []gatev1.ToolName{"deployService"}, Deny: []gatev1.ToolName{"dropDatabase"}},
			Rules: []gatev1.Rule{
				{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.matches("rm\\s+-rf\\s+/")`, Action: gatev1.ActionBlock, Reason: "destructive command on the root filesystem", Code: "destructive_command"},
				{Name: "fetch-needs-human", Tools: []string{"web_fetch"}, When: `!input.url.startsWith("https://github.com/")`, Action: gatev1.ActionAsk, Reason: "fetching from outside github.com needs a human"},
			},
		},
	}
}

func getPolicy(t *testing.T, p *gatev1.HarnessAgentPolicy) *gatev1.HarnessAgentPolicy {
	t.Helper()
	got := &gatev1.HarnessAgentPolicy{}
	if err := k8sClient.Get(testutil.Context(t, 60*time.Second), client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// waitCondition waits until the policy's condition has the status (and reason, if given) for
// the current generation.
func waitCondition(t *testing.T, p *gatev1.HarnessAgentPolicy, typ string, status metav1.ConditionStatus, reason string) *gatev1.HarnessAgentPolicy {
	t.Helper()
	var got *gatev1.HarnessAgentPolicy
	testutil.Eventually(t, 20*time.Second, func() error {
		got = getPolicy(t, p)
		c := meta.FindStatusCondition(got.Status.Conditions, typ)
		switch {
		case got.Status.ObservedGeneration != got.Generation:
			return fmt.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
		case c == nil:
			return fmt.Errorf("no %s condition", typ)
		case c.Status != status || (reason != "" && c.Reason != reason):
			return fmt.Errorf("%s is %s/%s (%s), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
		case c.ObservedGeneration != got.Generation:
			return fmt.Errorf("%s observedGeneration %d, generation %d", typ, c.ObservedGeneration, got.Generation)
		}
		return nil
	})
	return got
}

func children(t *testing.T, p *gatev1.HarnessAgentPolicy) (*corev1.ConfigMap, *networkingv1.NetworkPolicy) {
	t.Helper()
	ctx := testutil.Context(t, 60*time.Second)
	cm := &corev1.ConfigMap{}
	if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name + "-bootstrap"}, cm); err != nil {
		t.Fatal(err)
	}
	np := &networkingv1.NetworkPolicy{}
	if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name + "-egress"}, np); err != nil {
		t.Fatal(err)
	}
	return cm, np
}

func checkGoldenYAML(t *testing.T, name string, v any) {
	t.Helper()
	got, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, name, got)
}

func checkOwned(t *testing.T, obj metav1.Object, p *gatev1.HarnessAgentPolicy) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.UID != p.UID || ref.Kind != "HarnessAgentPolicy" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Fatalf("%s has no controller owner reference to the policy: %+v", obj.GetName(), obj.GetOwnerReferences())
	}
	if obj.GetLabels()[gatev1.LabelManagedBy] != "gate-operator" || obj.GetLabels()[gatev1.LabelPolicy] != p.Name {
		t.Fatalf("%s labels: %v", obj.GetName(), obj.GetLabels())
	}
}

func TestPolicyCreatesChildren(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	// A fixed namespace name: the golden files carry it.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "golden"}}
	if err := k8sClient.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := newPolicy("golden", "coding-agents")
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := waitCondition(t, p, gatev1.ConditionReady, metav1.ConditionTrue, gatev1.ReasonReady)
	cm, np := children(t, got)
	checkOwned(t, cm, got)
	checkOwned(t, np, got)
	checkGoldenYAML(t, "deny-all-configmap-data.yaml", cm.Data)
	checkGoldenYAML(t, "deny-all-networkpolicy-spec.yaml", np.Spec)
	if cm.Annotations[gatev1.AnnotationBootstrapHash] != cm.Data[bootstrap.KeyBootstrapHash] {
		t.Fatalf("annotation %q vs bootstrap-hash %q", cm.Annotations[gatev1.AnnotationBootstrapHash], cm.Data[bootstrap.KeyBootstrapHash])
	}
	s := got.Status
	if s.BootstrapHash != cm.Data[bootstrap.KeyBootstrapHash] || s.BootstrapConfigMap != cm.Name || s.NetworkPolicy != np.Name || s.RuleCount != 2 ||
		s.Enforcement != gatev1.EnforcementEnforce || s.AuditedRules != 0 {
		t.Fatalf("status does not describe the children: %+v", s)
	}
	snap, err := gate.LoadSnapshot([]byte(cm.Data[bootstrap.KeySnapshot]), "ws_123")
	if err != nil {
		t.Fatalf("the published snapshot does not verify: %v", err)
	}
	if snap.Digest != s.SnapshotDigest || snap.Policy != "golden/coding-agents" {
		t.Fatalf("snapshot %s %s vs status %s", snap.Policy, snap.Digest, s.SnapshotDigest)
	}
	if s.Egress == nil || s.Egress.Mode != gatev1.EgressModeDenyAll || len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 1 {
		t.Fatalf("want deny-all egress: status %+v, spec %+v", s.Egress, np.Spec)
	}
	for _, typ := range []string{gatev1.ConditionRulesCompiled, gatev1.ConditionBootstrapRendered, gatev1.ConditionEgressEnforced} {
		if c := meta.FindStatusCondition(s.Conditions, typ); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != got.Generation {
			t.Errorf("%s: %+v", typ, c)
		}
	}
}

func TestRuleChangeUpdatesHashAndDigest(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	p := newPolicy(testutil.CreateNamespace(ctx, t, k8sClient, "policy-"), "edits")
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	before := waitCondition(t, p, gatev1.ConditionReady, metav1.ConditionTrue, "")
	cmBefore, _ := children(t, before)

	before.Spec.Rules[0].Reason = "no deleting the root filesystem"
	if err := k8sClient.Update(ctx, before); err != nil {
		t.Fatal(err)
	}
	after := waitCondition(t, before, gatev1.ConditionReady, metav1.ConditionTrue, "")
	testutil.Eventually(t, 10*time.Second, func() error {
		after = getPolicy(t, before)
		if after.Status.BootstrapHash == cmBefore.Data[bootstrap.KeyBootstrapHash] {
			return fmt.Errorf("bootstrap hash unchanged")
		}
		return nil
	})
	cmAfter, _ := children(t, after)
	snap, err := gate.LoadSnapshot([]byte(cmAfter.Data[bootstrap.KeySnapshot]), "ws_123")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Digest == before.Status.SnapshotDigest || snap.Digest != after.Status.SnapshotDigest || snap.Rules[0].Reason != "no deleting the root filesystem" {
		t.Fatalf("the snapshot did not follow the edit: digest %s (was %s, status %s)", snap.Digest, before.Status.SnapshotDigest, after.Status.SnapshotDigest)
	}
	if after.Status.ObservedGeneration != after.Generation || after.Generation == before.Status.ObservedGeneration {
		t.Fatalf("observedGeneration %d, generation %d", after.Status.ObservedGeneration, after.Generation)
	}
}

// TestInputOptInReachesTheSnapshot: a policy's spec.decisionRecords.input is published in its
// snapshot, which every surface's gate reads, so their records hold the input masked as it says.
func TestInputOptInReachesTheSnapshot(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	p := newPolicy(testutil.CreateNamespace(ctx, t, k8sClient, "policy-"), "recorded")
	p.Spec.DecisionRecords = &gatev1.DecisionRecordsSpec{Input: &gatev1.RecordedInput{Erase: []gatev1.JSONPointer{"/content"}, Hash: []gatev1.JSONPointer{"/command"}}}
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	cm, _ := children(t, waitCondition(t, p, gatev1.ConditionReady, metav1.ConditionTrue, ""))
	snap, err := gate.LoadSnapshot([]byte(cm.Data[bootstrap.KeySnapshot]), "ws_123")
	if err != nil {
		t.Fatal(err)
	}
	if r := snap.RecordInput; r == nil || !slices.Equal(r.Erase, []string{"/content"}) || !slices.Equal(r.Hash, []string{"/command"}) {
		t.Fatalf("snapshot recordInput %+v", r)
	}
}

func TestInvalidRuleKeepsLastGoodConfigMap(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	p := newPolicy(testutil.CreateNamespace(ctx, t, k8sClient, "policy-"), "typo")
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	good := waitCondition(t, p, gatev1.ConditionReady, metav1.ConditionTrue, "")
	cmGood, _ := children(t, good)

	good.Spec.Rules[1].When = `!inptu.url.startsWith("https://github.com/")`
	if err := k8sClient.Update(ctx, good); err != nil {
		t.Fatal(err)
	}
	bad := waitCondition(t, good, gatev1.ConditionRulesCompiled, metav1.ConditionFalse, gatev1.ReasonCompileFailed)
	c := meta.FindStatusCondition(bad.Status.Conditions, gatev1.ConditionRulesCompiled)
	if !strings.Contains(c.Message, "spec.rules[1].when: ") || !strings.Contains(c.Message, "undeclared reference to 'inptu'") {
		t.Fatalf("the condition does not name the field and the compiler message: %q", c.Message)
	}
	waitCondition(t, good, gatev1.ConditionBootstrapRendered, metav1.ConditionFalse, gatev1.ReasonLastGoodKept)
	waitCondition(t, good, gatev1.ConditionReady, metav1.ConditionFalse, gatev1.ReasonCompileFailed)
	cmNow, _ := children(t, bad)
	if cmNow.ResourceVersion != cmGood.ResourceVersion || fmt.Sprint(cmNow.Data) != fmt.Sprint(cmGood.Data) {
		t.Fatal("the last good ConfigMap was changed")
	}
	if bad.Status.SnapshotDigest != good.Status.SnapshotDigest {
		t.Fatalf("status reports digest %s, but %s is in force", bad.Status.SnapshotDigest, good.Status.SnapshotDigest)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		var evs eventsv1.EventList
		if err := k8sClient.List(ctx, &evs, client.InNamespace(p.Namespace)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == gatev1.ReasonCompileFailed && e.Regarding.Name == p.Name && strings.Contains(e.Note, "spec.rules[1].when") {
				return nil
			}
		}
		return fmt.Errorf("no CompileFailed event among %d", len(evs.Items))
	})
}

func TestNeverCompiledPolicyBlocksEverything(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	p := newPolicy(testutil.CreateNamespace(ctx, t, k8sClient, "policy-"), "broken")
	p.Spec.Rules[0].When = `input.command.matches(`
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := waitCondition(t, p, gatev1.ConditionBootstrapRendered, metav1.ConditionFalse, gatev1.ReasonPolicyInvalid)
	cm, _ := children(t, got)
	g := gate.New("ws_123")
	if err := g.Load([]byte(cm.Data[bootstrap.KeySnapshot])); err != nil {
		t.Fatal(err)
	}
	d := g.Decide(&gate.Call{Tool: "Read", Input: map[string]any{"file_path": "README.md"}})
	if d.Verdict != gate.Block || d.Code != gate.CodePolicyInvalid {
		t.Fatalf("a never-compiled policy's snapshot decided %+v", d)
	}
	if !strings.Contains(d.Reason, "spec.rules[0].when") {
		t.Fatalf("the refusal does not say why: %q", d.Reason)
	}
}

func TestChildrenAreRepaired(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	p := newPolicy(testutil.CreateNamespace(ctx, t, k8sClient, "policy-"), "repair")
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := waitCondition(t, p, gatev1.ConditionReady, metav1.ConditionTrue, "")
	cm, np := children(t, got)
	want := cm.Data[bootstrap.KeySnapshot]

	if err := k8sClient.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		again := &corev1.ConfigMap{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cm), again); err != nil {
			return err
		}
		if again.UID == cm.UID || again.Data[bootstrap.KeySnapshot] != want {
			return fmt.Errorf("not recreated yet")
		}
		return nil
	})

	cm, _ = children(t, got)
	cm.Data[bootstrap.KeySnapshot] = `{"tampered": true}`
	if err := k8sClient.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		again := &corev1.ConfigMap{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cm), again); err != nil {
			return err
		}
		if again.Data[bootstrap.KeySnapshot] != want {
			return fmt.Errorf("snapshot still tampered")
		}
		return nil
	})

	// Reopening the deny-all policy by hand is undone.
	np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	if err := k8sClient.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		again := &networkingv1.NetworkPolicy{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(np), again); err != nil {
			return err
		}
		if len(again.Spec.Egress) != 0 {
			return fmt.Errorf("egress still reopened: %+v", again.Spec.Egress)
		}
		return nil
	})
}

func TestAllowListResolution(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "policy-")
	resolver.set("api.rotating.example", time.Second, "192.0.2.1", "192.0.2.2")
	resolver.set("metadata.example", time.Hour, "169.254.169.254")
	p := newPolicy(ns, "allow")
	p.Spec.Egress = gatev1.EgressSpec{
		AllowedHosts: []gatev1.Hostname{"api.rotating.example", "metadata.example", "gone.example"},
		AllowedCIDRs: []gatev1.CIDR{"169.254.0.0/15"},
		Ports:        []int32{443},
	}
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := waitCondition(t, p, gatev1.ConditionEgressEnforced, metav1.ConditionFalse, gatev1.ReasonHostsUnresolved)
	if c := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionEgressEnforced); !strings.Contains(c.Message, "gone.example") {
		t.Fatalf("the condition does not name the unresolved host: %q", c.Message)
	}
	_, np := children(t, got)
	blocks := ipBlocks(np)
	if blocks != "169.254.0.0/15[169.254.0.0/16 169.254.169.254/32] 192.0.2.1/32 192.0.2.2/32" {
		t.Fatalf("ipBlocks %s: want both addresses, the metadata address dropped and the metadata ranges carved out", blocks)
	}
	if got.Status.Egress.Mode != gatev1.EgressModeAllowList || got.Status.Egress.ResolvedHosts != 2 || got.Status.Egress.Addresses != 2 {
		t.Fatalf("egress status %+v", got.Status.Egress)
	}

	// The record set rotates: .2 is replaced by .3. The next resolution, at the TTL floor,
	// keeps .2 for one window; a window later it is gone.
	calls := resolver.callCount("api.rotating.example")
	resolver.set("api.rotating.example", time.Second, "192.0.2.1", "192.0.2.3")
	testutil.Eventually(t, 3*testMinResolve, func() error {
		_, np := children(t, got)
		if b := ipBlocks(np); !strings.HasSuffix(b, "] 192.0.2.1/32 192.0.2.2/32 192.0.2.3/32") {
			return fmt.Errorf("ipBlocks %s", b)
		}
		return nil
	})
	if resolver.callCount("api.rotating.example") <= calls {
		t.Fatal("the host was not re-resolved")
	}
	testutil.Eventually(t, 4*testMinResolve, func() error {
		_, np := children(t, got)
		if b := ipBlocks(np); !strings.HasSuffix(b, "] 192.0.2.1/32 192.0.2.3/32") {
			return fmt.Errorf("ipBlocks %s", b)
		}
		return nil
	})
}

// ipBlocks lists the ipBlock peers of the non-DNS rule as "cidr[except...]".
func ipBlocks(np *networkingv1.NetworkPolicy) string {
	var out []string
	for _, rule := range np.Spec.Egress {
		for _, peer := range rule.To {
			if peer.IPBlock == nil {
				continue
			}
			s := peer.IPBlock.CIDR
			if len(peer.IPBlock.Except) > 0 {
				s += "[" + strings.Join(peer.IPBlock.Except, " ") + "]"
			}
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

func TestShadowingNetworkPolicyIsReported(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "policy-")
	p := newPolicy(ns, "shadowed")
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, p, gatev1.ConditionReady, metav1.ConditionTrue, "")

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sandbox-0", Labels: map[string]string{gatev1.LabelPolicy: "shadowed", "team": "ml"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}},
	}
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	wide := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-ml-egress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{}},
		},
	}
	if err := k8sClient.Create(ctx, wide); err != nil {
		t.Fatal(err)
	}
	got := waitCondition(t, p, gatev1.ConditionEgressEnforced, metav1.ConditionFalse, gatev1.ReasonShadowedByPolicy)
	if c := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionEgressEnforced); !strings.Contains(c.Message, "team-ml-egress") {
		t.Fatalf("the condition does not name the shadowing policy: %q", c.Message)
	}
	waitCondition(t, p, gatev1.ConditionReady, metav1.ConditionFalse, gatev1.ReasonShadowedByPolicy)

	// Relabelling the pod out of the other policy's reach clears it.
	pod.Labels = map[string]string{gatev1.LabelPolicy: "shadowed"}
	if err := k8sClient.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, p, gatev1.ConditionEgressEnforced, metav1.ConditionTrue, gatev1.ReasonEnforced)
}

func TestShadowingPolicies(t *testing.T) {
	ours := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}
	egress := []networkingv1.NetworkPolicyEgressRule{{}}
	np := func(name string, sel map[string]string, policyTypes []networkingv1.PolicyType, eg []networkingv1.NetworkPolicyEgressRule) networkingv1.NetworkPolicy {
		return networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel}, PolicyTypes: policyTypes, Egress: eg}}
	}
	others := []networkingv1.NetworkPolicy{
		np("all-pods", nil, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, egress),
		np("same-pods", map[string]string{"tier": "sandbox"}, nil, egress),
		np("ingress-only", map[string]string{"tier": "sandbox"}, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, egress),
		np("no-egress-rules", map[string]string{"tier": "sandbox"}, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, nil),
		np("other-pods", map[string]string{"app": "web"}, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, egress),
	}
	pods := []map[string]string{{"app": "agent", "tier": "sandbox"}, {"app": "web"}}
	if got := fmt.Sprint(shadowingPolicies(ours, others, pods)); got != "[all-pods same-pods]" {
		t.Fatalf("got %s", got)
	}
}

// updatePolicy applies mutate to the latest version of the policy, retrying on conflicts with
// the controller's status writes.
func updatePolicy(t *testing.T, p *gatev1.HarnessAgentPolicy, mutate func(*gatev1.HarnessAgentPolicy)) {
	t.Helper()
	ctx := testutil.Context(t, 60*time.Second)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest := &gatev1.HarnessAgentPolicy{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), latest); err != nil {
			return err
		}
		mutate(latest)
		return k8sClient.Update(ctx, latest)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInvalidUpdateKeepsLastGoodEgress: an update whose rules do not compile never loosens the
// egress in force, even when it also widens spec.egress; fixing the rules brings the new egress.
func TestInvalidUpdateKeepsLastGoodEgress(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	resolver.set("api.kept.example", time.Hour, "192.0.2.80")
	p := newPolicy(testutil.CreateNamespace(ctx, t, k8sClient, "policy-"), "kept")
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	good := waitCondition(t, p, gatev1.ConditionReady, metav1.ConditionTrue, "")
	_, npGood := children(t, good)
	if len(npGood.Spec.Egress) != 0 {
		t.Fatalf("want deny-all egress first: %+v", npGood.Spec.Egress)
	}
	goodWhen := good.Spec.Rules[1].When

	updatePolicy(t, p, func(p *gatev1.HarnessAgentPolicy) {
		p.Spec.Rules[1].When = `!inptu.url.startsWith("https://github.com/")`
		p.Spec.Egress = gatev1.EgressSpec{AllowedHosts: []gatev1.Hostname{"api.kept.example"}, AllowedCIDRs: []gatev1.CIDR{"198.51.100.0/24"}, Ports: []int32{443}}
	})
	bad := waitCondition(t, p, gatev1.ConditionRulesCompiled, metav1.ConditionFalse, gatev1.ReasonCompileFailed)
	// Status is written after the children are applied, so the reconcile that saw this
	// generation has already applied whatever it was going to.
	_, np := children(t, bad)
	if len(np.Spec.Egress) != 0 || np.ResourceVersion != npGood.ResourceVersion {
		t.Fatalf("an update whose rules do not compile changed the egress in force: %s", ipBlocks(np))
	}
	bad = waitCondition(t, p, gatev1.ConditionEgressEnforced, metav1.ConditionFalse, gatev1.ReasonLastGoodKept)
	c := meta.FindStatusCondition(bad.Status.Conditions, gatev1.ConditionEgressEnforced)
	if !strings.Contains(c.Message, "do not compile") || !strings.Contains(c.Message, "denies all egress") {
		t.Fatalf("the condition does not say why the egress in force was kept: %q", c.Message)
	}
	if bad.Status.Egress == nil || bad.Status.Egress.Mode != gatev1.EgressModeDenyAll {
		t.Fatalf("status must describe the egress in force: %+v", bad.Status.Egress)
	}

	updatePolicy(t, p, func(p *gatev1.HarnessAgentPolicy) { p.Spec.Rules[1].When = goodWhen })
	fixed := waitCondition(t, p, gatev1.ConditionEgressEnforced, metav1.ConditionTrue, gatev1.ReasonEnforced)
	_, np = children(t, fixed)
	if b := ipBlocks(np); b != "192.0.2.80/32 198.51.100.0/24" {
		t.Fatalf("ipBlocks %s: the allow-list did not arrive once the rules compiled", b)
	}
	if fixed.Status.Egress.Mode != gatev1.EgressModeAllowList {
		t.Fatalf("egress status %+v", fixed.Status.Egress)
	}
}

// TestNeverCompiledPolicyDeniesAllEgress: a policy whose rules have never compiled gets no
// egress at all, whatever spec.egress allows.
func TestNeverCompiledPolicyDeniesAllEgress(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	p := newPolicy(testutil.CreateNamespace(ctx, t, k8sClient, "policy-"), "never")
	p.Spec.Rules[0].When = `input.command.matches(`
	p.Spec.Egress = gatev1.EgressSpec{AllowedCIDRs: []gatev1.CIDR{"198.51.100.0/24"}, Ports: []int32{443}}
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := waitCondition(t, p, gatev1.ConditionRulesCompiled, metav1.ConditionFalse, gatev1.ReasonCompileFailed)
	_, np := children(t, got)
	if len(np.Spec.Egress) != 0 {
		t.Fatalf("a policy that never compiled allows egress: %s", ipBlocks(np))
	}
	got = waitCondition(t, p, gatev1.ConditionEgressEnforced, metav1.ConditionFalse, gatev1.ReasonPolicyInvalid)
	if c := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionEgressEnforced); !strings.Contains(c.Message, "denies all egress") {
		t.Fatalf("the condition does not say egress is denied: %q", c.Message)
	}
}

// TestAllowedHostsNeverResolveInside: an allowed host whose DNS answer points at loopback or
// into the cluster's Service range contributes no address, and the condition names it; an
// allowed CIDR over the Pod range still works, for addresses a name resolves to as well.
func TestAllowedHostsNeverResolveInside(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	resolver.set("rebind.example", time.Hour, "127.0.0.1", "192.0.2.90")
	resolver.set("svc.rebind.example", time.Hour, "10.96.0.10")
	resolver.set("pod.example", time.Hour, "10.244.3.4")
	p := newPolicy(testutil.CreateNamespace(ctx, t, k8sClient, "policy-"), "rebind")
	p.Spec.Egress = gatev1.EgressSpec{
		AllowedHosts: []gatev1.Hostname{"rebind.example", "svc.rebind.example", "pod.example"},
		AllowedCIDRs: []gatev1.CIDR{"10.244.0.0/16"},
		Ports:        []int32{443},
	}
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := waitCondition(t, p, gatev1.ConditionEgressEnforced, metav1.ConditionFalse, gatev1.ReasonAddressesRejected)
	c := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionEgressEnforced)
	for _, want := range []string{"rebind.example resolved to 127.0.0.1 (loopback)", "svc.rebind.example resolved to 10.96.0.10 (in the cluster range 10.96.0.0/12)"} {
		if !strings.Contains(c.Message, want) {
			t.Fatalf("the condition must name each host and address it dropped (%q): %q", want, c.Message)
		}
	}
	if strings.Contains(c.Message, "pod.example") {
		t.Fatalf("an address an allowed CIDR covers is not rejected: %q", c.Message)
	}
	waitCondition(t, p, gatev1.ConditionReady, metav1.ConditionFalse, gatev1.ReasonAddressesRejected)
	_, np := children(t, got)
	if b := ipBlocks(np); b != "10.244.0.0/16 10.244.3.4/32 192.0.2.90/32" {
		t.Fatalf("ipBlocks %s", b)
	}
}
