package controllers

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/testutil"
)

// fleetNamespace creates a namespace with the label the test's cluster policies select by
// (each test its own value, so no cluster policy here reaches another test's namespaces).
func fleetNamespace(t *testing.T, prefix, selectValue string) *corev1.Namespace {
	t.Helper()
	ctx := testutil.Context(t, 30*time.Second)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if selectValue != "" {
		ns.Labels = map[string]string{"fleet-test": selectValue}
	}
	if err := k8sClient.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

func newClusterPolicy(name, selectValue string, rules ...gatev1.Rule) *gatev1.ClusterHarnessAgentPolicy {
	return &gatev1.ClusterHarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gatev1.ClusterHarnessAgentPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"fleet-test": selectValue}},
			Priority:          10,
			DefaultAction:     gatev1.ActionAllow,
			FailurePolicy:     gatev1.FailurePolicyFail,
			Enforcement:       gatev1.EnforcementEnforce,
			Rules:             rules,
		},
	}
}

// layeredDecision decides a Bash command with the layers a bootstrap ConfigMap carries, as the
// hook of a pod with these labels would.
func layeredDecision(t *testing.T, data map[string]string, workspace string, labels map[string]string, command string) gate.Decision {
	t.Helper()
	idx, err := gate.LoadLayersIndex([]byte(data[gate.LayersFileName]), workspace)
	if err != nil {
		t.Fatalf("the layers index does not load: %v", err)
	}
	primary, err := gate.LoadSnapshot([]byte(data[bootstrap.KeySnapshot]), workspace)
	if err != nil {
		t.Fatal(err)
	}
	layers := map[string]*gate.Snapshot{}
	for _, l := range idx.Layers {
		s, err := gate.LoadSnapshot([]byte(data[l.File]), workspace)
		if err != nil {
			t.Fatalf("layer %s: %v", l.Name, err)
		}
		layers[l.Name] = s
	}
	set, err := gate.NewLayerSet(idx, primary, layers, labels)
	if err != nil {
		t.Fatal(err)
	}
	input, err := gate.RenderInput(map[string]any{"command": command})
	if err != nil {
		t.Fatal(err)
	}
	return set.Compile().Decide(&gate.Call{Tool: "Bash", Input: input, Surface: gate.SurfaceHook})
}

func waitClusterPolicy(t *testing.T, c *gatev1.ClusterHarnessAgentPolicy, check func(*gatev1.ClusterHarnessAgentPolicy) error) *gatev1.ClusterHarnessAgentPolicy {
	t.Helper()
	got := &gatev1.ClusterHarnessAgentPolicy{}
	testutil.Eventually(t, 20*time.Second, func() error {
		if err := k8sClient.Get(testutil.Context(t, 10*time.Second), client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		if got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
		}
		return check(got)
	})
	return got
}

// waitBundle waits until the policy's status and bootstrap ConfigMap carry exactly these
// cluster layers, and returns the ConfigMap's data.
func waitBundle(t *testing.T, p *gatev1.HarnessAgentPolicy, layers ...string) map[string]string {
	t.Helper()
	var data map[string]string
	testutil.Eventually(t, 20*time.Second, func() error {
		got := getPolicy(t, p)
		if !slices.Equal(got.Status.ClusterPolicies, layers) {
			return fmt.Errorf("status.clusterPolicies %v, want %v", got.Status.ClusterPolicies, layers)
		}
		cm := &corev1.ConfigMap{}
		if err := k8sClient.Get(testutil.Context(t, 10*time.Second), client.ObjectKey{Namespace: p.Namespace, Name: bootstrap.ConfigMapName(p.Name)}, cm); err != nil {
			return err
		}
		if cm.Data[bootstrap.KeyBootstrapHash] != got.Status.BootstrapHash {
			return fmt.Errorf("ConfigMap has bootstrap %s, status %s", cm.Data[bootstrap.KeyBootstrapHash], got.Status.BootstrapHash)
		}
		_, layered := cm.Data[gate.LayersFileName]
		if layered != (len(layers) > 0) {
			return fmt.Errorf("the ConfigMap has a layers index: %t, want %t", layered, len(layers) > 0)
		}
		for _, l := range layers {
			if _, ok := cm.Data[gate.ClusterLayerFile(l)]; !ok {
				return fmt.Errorf("the ConfigMap has no %s", gate.ClusterLayerFile(l))
			}
		}
		data = cm.Data
		return nil
	})
	return data
}

// TestClusterPolicyLayersReachBundles: a cluster policy's layer is published into the bundles
// of the namespace policies of exactly the namespaces it selects, follows namespace relabels
// and edits of the cluster policy, and is removed with it; its Block holds against the
// namespace policy's Allow; the namespaces it does not select keep the bundle they had.
func TestClusterPolicyLayersReachBundles(t *testing.T) {
	ctx := testutil.Context(t, 2*time.Minute)
	sel := "layers-" + rand.String(5)
	selected := fleetNamespace(t, "fleet-a-", sel)
	other := fleetNamespace(t, "fleet-b-", "")
	pa, pb := newPolicy(selected.Name, "agents"), newPolicy(other.Name, "agents")
	for _, p := range []*gatev1.HarnessAgentPolicy{pa, pb} {
		p.Spec.Rules = append(p.Spec.Rules, gatev1.Rule{Name: "echo-ok", Tools: []string{"bash"}, When: `input.command.startsWith("echo")`, Action: gatev1.ActionAllow})
		if err := k8sClient.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	waitCondition(t, pb, gatev1.ConditionReady, metav1.ConditionTrue, gatev1.ReasonReady)
	before := waitBundle(t, pb)

	c := newClusterPolicy("baseline-"+sel, sel,
		gatev1.Rule{Name: "no-marker", Tools: []string{"bash"}, When: `input.command.contains("cluster-marker")`, Action: gatev1.ActionBlock, Reason: "the platform forbids the marker", Code: "marker"})
	c.Spec.PermissionMode = gatev1.PermissionModeAllowReads
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeClusterPolicy(t, c, pa, pb) })

	data := waitBundle(t, pa, c.Name)
	if !strings.Contains(data[bootstrap.KeyHookScript], " --layers") {
		t.Errorf("a layered bundle's wrapper does not pass --layers:\n%s", data[bootstrap.KeyHookScript])
	}
	if !strings.Contains(data[bootstrap.KeyHarnessSettings], `"allow-reads"`) {
		t.Errorf("the cluster policy's permissionMode floor is not in the harness settings: %s", data[bootstrap.KeyHarnessSettings])
	}
	if !bootstrap.Verify(data, pa.Spec.WorkspaceID, bootstrap.Options{}) || !bootstrap.OnlyBundleKeys(data) {
		t.Error("the layered bundle does not verify against its bootstrap hash")
	}
	d := layeredDecision(t, data, pa.Spec.WorkspaceID, nil, "echo cluster-marker")
	if d.Verdict != gate.Block || d.Layer != gate.LayerKindCluster+"/"+c.Name || d.Rule != "no-marker" {
		t.Errorf("the cluster Block against the namespace's Allow: %s by %s rule %s (%s)", d.Verdict, d.Layer, d.Rule, d.Reason)
	}
	if d := layeredDecision(t, data, pa.Spec.WorkspaceID, nil, "echo fine"); d.Verdict != gate.Allow {
		t.Errorf("a call no layer refuses: %s by %s (%s)", d.Verdict, d.Layer, d.Reason)
	}
	if got := waitBundle(t, pb); !maps.Equal(got, before) {
		t.Error("the bundle of a namespace the cluster policy does not select changed")
	}
	cs := waitClusterPolicy(t, c, func(got *gatev1.ClusterHarnessAgentPolicy) error {
		if !meta.IsStatusConditionTrue(got.Status.Conditions, gatev1.ConditionReady) || got.Status.Namespaces != 1 || got.Status.RuleCount != 1 {
			return fmt.Errorf("status %+v", got.Status)
		}
		return nil
	})
	if cs.Status.SnapshotDigest == "" || cs.Status.Enforcement != gatev1.EnforcementEnforce {
		t.Errorf("status does not describe the layer: %+v", cs.Status)
	}

	// The namespace policy's own Block still holds (it can tighten), and names its layer.
	if d := layeredDecision(t, data, pa.Spec.WorkspaceID, nil, "rm -rf /"); d.Verdict != gate.Block || d.Layer != "HarnessAgentPolicy/"+pa.Namespace+"/"+pa.Name {
		t.Errorf("the namespace policy's Block: %s by %s", d.Verdict, d.Layer)
	}

	// Relabelling: the other namespace joins, the first one leaves.
	patchLabels(t, other, map[string]string{"fleet-test": sel})
	waitBundle(t, pb, c.Name)
	patchLabels(t, selected, map[string]string{"fleet-test": "none"})
	if data := waitBundle(t, pa); strings.Contains(data[bootstrap.KeyHookScript], "--layers") {
		t.Error("a bundle without layers still passes --layers")
	}

	// An edit of the cluster policy reaches the bundles it is in; deleting it removes it.
	digest := layerDigest(t, waitBundle(t, pb, c.Name), pb.Spec.WorkspaceID, c.Name)
	c = waitClusterPolicy(t, c, func(*gatev1.ClusterHarnessAgentPolicy) error { return nil })
	c.Spec.Rules[0].When = `input.command.contains("other-marker")`
	if err := k8sClient.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if got := layerDigest(t, waitBundle(t, pb, c.Name), pb.Spec.WorkspaceID, c.Name); got == digest {
			return fmt.Errorf("the layer's digest is still %s", got)
		}
		return nil
	})
	if err := k8sClient.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := waitBundle(t, pb); !maps.Equal(got, before) {
		t.Error("removing the cluster policy did not restore the bundle the namespace had before it")
	}
}

// TestBrokenClusterPolicyBlocks: a cluster policy whose rules do not compile (admitted with
// the webhooks off) is reported, and its layer blocks every call of the pods it selects rather
// than being dropped.
func TestBrokenClusterPolicyBlocks(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	sel := "broken-" + rand.String(5)
	ns := fleetNamespace(t, "fleet-broken-", sel)
	p := newPolicy(ns.Name, "agents")
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	c := newClusterPolicy("broken-"+sel, sel, gatev1.Rule{Name: "typo", When: `has(inptu.command)`, Action: gatev1.ActionBlock, Reason: "typo"})
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeClusterPolicy(t, c, p) })
	waitClusterPolicy(t, c, func(got *gatev1.ClusterHarnessAgentPolicy) error {
		cond := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionRulesCompiled)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != gatev1.ReasonCompileFailed || !strings.Contains(cond.Message, "spec.rules[0].when") {
			return fmt.Errorf("RulesCompiled %+v", cond)
		}
		if meta.IsStatusConditionTrue(got.Status.Conditions, gatev1.ConditionReady) {
			return fmt.Errorf("Ready is True")
		}
		return nil
	})
	data := waitBundle(t, p, c.Name)
	if d := layeredDecision(t, data, p.Spec.WorkspaceID, nil, "echo hello"); d.Verdict != gate.Block || d.Code != gate.CodePolicyInvalid || d.Layer != gate.LayerKindCluster+"/"+c.Name {
		t.Errorf("a call of a pod under a broken baseline: %s %s by %s", d.Verdict, d.Code, d.Layer)
	}
}

// TestClusterPolicyPodSelectorAndCounts: the pod selector travels in the index and the hook's
// labels decide whether the layer applies; status counts the pods it governs.
func TestClusterPolicyPodSelectorAndCounts(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	sel := "pods-" + rand.String(5)
	ns := fleetNamespace(t, "fleet-pods-", sel)
	p := newPolicy(ns.Name, "agents")
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	c := newClusterPolicy("tier-"+sel, sel, gatev1.Rule{Name: "no-curl", Tools: []string{"bash"}, When: `input.command.startsWith("curl")`, Action: gatev1.ActionAsk, Reason: "curl needs a human"})
	c.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"tier": "untrusted"}}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeClusterPolicy(t, c, p) })
	for i, tier := range []string{"untrusted", "trusted"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: fmt.Sprintf("agent-%d", i), Labels: map[string]string{gatev1.LabelPolicy: p.Name, "tier": tier}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1"}}},
		}
		if err := k8sClient.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	waitClusterPolicy(t, c, func(got *gatev1.ClusterHarnessAgentPolicy) error {
		if got.Status.Namespaces != 1 || got.Status.Pods != 1 {
			return fmt.Errorf("governs %d namespaces and %d pods, want 1 and 1", got.Status.Namespaces, got.Status.Pods)
		}
		return nil
	})
	data := waitBundle(t, p, c.Name)
	if d := layeredDecision(t, data, p.Spec.WorkspaceID, map[string]string{"tier": "untrusted"}, "curl https://example.com"); d.Verdict != gate.Ask || d.Layer != gate.LayerKindCluster+"/"+c.Name {
		t.Errorf("a selected pod's curl: %s by %s", d.Verdict, d.Layer)
	}
	if d := layeredDecision(t, data, p.Spec.WorkspaceID, map[string]string{"tier": "trusted"}, "curl https://example.com"); d.Verdict != gate.Allow {
		t.Errorf("a pod the layer does not select: %s by %s (%s)", d.Verdict, d.Layer, d.Reason)
	}
}

func patchLabels(t *testing.T, ns *corev1.Namespace, labels map[string]string) {
	t.Helper()
	patch := client.MergeFrom(ns.DeepCopy())
	ns.Labels = labels
	if err := k8sClient.Patch(testutil.Context(t, 10*time.Second), ns, patch); err != nil {
		t.Fatal(err)
	}
}

func layerDigest(t *testing.T, data map[string]string, workspace, name string) string {
	t.Helper()
	s, err := gate.LoadSnapshot([]byte(data[gate.ClusterLayerFile(name)]), workspace)
	if err != nil {
		t.Fatal(err)
	}
	return s.Digest
}

// removeClusterPolicy deletes a test's cluster policy and waits until the bundles it was in
// no longer carry it, so no rebuild it causes outlives the test.
func removeClusterPolicy(t *testing.T, c *gatev1.ClusterHarnessAgentPolicy, policies ...*gatev1.HarnessAgentPolicy) {
	t.Helper()
	if err := k8sClient.Delete(testutil.Context(t, 10*time.Second), c); client.IgnoreNotFound(err) != nil {
		t.Error(err)
	}
	for _, p := range policies {
		waitBundle(t, p)
	}
}

// TestExceptionsReachBundles: an active exception of a cluster layer is compiled into the
// bundles of its namespace with its expiry, and lifts exactly its rule there; it is marked
// Expired at expiresAt and leaves the bundle; one its policy does not allow is Refused and never
// published.
func TestExceptionsReachBundles(t *testing.T) {
	ctx := testutil.Context(t, 2*time.Minute)
	sel := "exc-" + rand.String(5)
	ns := fleetNamespace(t, "fleet-exc-", sel)
	p := newPolicy(ns.Name, "agents")
	p.Spec.Rules = append(p.Spec.Rules, gatev1.Rule{Name: "echo-ok", Tools: []string{"bash"}, When: `input.command.startsWith("echo")`, Action: gatev1.ActionAllow})
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	c := newClusterPolicy("baseline-"+sel, sel,
		gatev1.Rule{Name: "no-marker", Tools: []string{"bash"}, When: `input.command.contains("marker")`, Action: gatev1.ActionBlock, Reason: "marker"},
		gatev1.Rule{Name: "no-other", Tools: []string{"bash"}, When: `input.command.contains("other")`, Action: gatev1.ActionBlock, Reason: "other"})
	c.Spec.Exceptions = &gatev1.ClusterExceptionPolicy{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"fleet-test": sel}},
		MaxDuration:       metav1.Duration{Duration: time.Hour},
	}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeClusterPolicy(t, c, p) })
	waitBundle(t, p, c.Name)

	expires := time.Now().Add(8 * time.Second).Truncate(time.Second)
	gex := &gatev1.GateException{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "lift-marker"},
		Spec: gatev1.GateExceptionSpec{
			PolicyRef: gatev1.ExceptionPolicyRef{Kind: gatev1.ExceptionOfClusterPolicy, Name: c.Name},
			Rules:     []gatev1.RuleName{"no-marker"}, ExpiresAt: metav1.NewTime(expires), Reason: "incident 42",
		},
	}
	tooLong := gex.DeepCopy()
	tooLong.Name, tooLong.Spec.ExpiresAt = "too-long", metav1.NewTime(time.Now().Add(2*time.Hour))
	for _, e := range []*gatev1.GateException{gex, tooLong} {
		if err := k8sClient.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	phase := func(e *gatev1.GateException, want gatev1.ExceptionPhase) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, func() error {
			got := &gatev1.GateException{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(e), got); err != nil {
				return err
			}
			if got.Status.Phase != want {
				return fmt.Errorf("%s is %q (%s), want %s", e.Name, got.Status.Phase, got.Status.Message, want)
			}
			return nil
		})
	}
	phase(gex, gatev1.ExceptionActive)
	phase(tooLong, gatev1.ExceptionRefused)
	var data map[string]string
	testutil.Eventually(t, 20*time.Second, func() error {
		data = waitBundle(t, p, c.Name)
		idx, err := gate.LoadLayersIndex([]byte(data[gate.LayersFileName]), p.Spec.WorkspaceID)
		if err != nil {
			return err
		}
		if len(idx.Layers) != 1 || len(idx.Layers[0].Exceptions) != 1 || idx.Layers[0].Exceptions[0].Name != gex.Name ||
			idx.Layers[0].Exceptions[0].ExpiresAt != expires.UTC().Format(time.RFC3339) {
			return fmt.Errorf("the layer's exceptions: %+v", idx.Layers)
		}
		return nil
	})
	if time.Now().Before(expires.Add(-time.Second)) {
		if d := layeredDecision(t, data, p.Spec.WorkspaceID, nil, "echo marker"); d.Verdict != gate.Allow {
			t.Errorf("the excepted rule still decides: %s by %s %s", d.Verdict, d.Layer, d.Rule)
		}
	}
	if d := layeredDecision(t, data, p.Spec.WorkspaceID, nil, "echo other"); d.Verdict != gate.Block || d.Rule != "no-other" {
		t.Errorf("a rule the exception does not name: %s by %s", d.Verdict, d.Rule)
	}
	// The same bundle, after expiresAt: the gate's own clock ends the exception.
	time.Sleep(time.Until(expires))
	if d := layeredDecision(t, data, p.Spec.WorkspaceID, nil, "echo marker"); d.Verdict != gate.Block || d.Rule != "no-marker" {
		t.Errorf("the bundle's exception after expiresAt: %s by %s", d.Verdict, d.Rule)
	}
	phase(gex, gatev1.ExceptionExpired)
	testutil.Eventually(t, 20*time.Second, func() error {
		idx, err := gate.LoadLayersIndex([]byte(waitBundle(t, p, c.Name)[gate.LayersFileName]), p.Spec.WorkspaceID)
		if err != nil {
			return err
		}
		if len(idx.Layers[0].Exceptions) != 0 {
			return fmt.Errorf("the expired exception is still in the bundle")
		}
		return nil
	})
	got := &gatev1.GateException{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(gex), got); err != nil {
		t.Fatalf("an expired exception must stay (GitOps owns it): %v", err)
	}
}
