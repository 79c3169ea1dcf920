package controllers

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/egress"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/testutil"
)

// baselineChildren reads a namespace's baseline ConfigMap and NetworkPolicy from the API
// server; nil for each that does not exist.
func baselineChildren(t *testing.T, namespace string) (*corev1.ConfigMap, *networkingv1.NetworkPolicy, error) {
	t.Helper()
	ctx := testutil.Context(t, 10*time.Second)
	cm, np := &corev1.ConfigMap{}, &networkingv1.NetworkPolicy{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: bootstrap.BaselineConfigMap}, cm); apierrors.IsNotFound(err) {
		cm = nil
	} else if err != nil {
		return nil, nil, err
	}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: BaselineNetworkPolicy}, np); apierrors.IsNotFound(err) {
		np = nil
	} else if err != nil {
		return nil, nil, err
	}
	return cm, np, nil
}

// waitBaseline waits until the namespace's baseline carries exactly these cluster layers, in
// this order, each child labelled and owned (not controlled) by exactly those cluster
// policies; with none, until the namespace has neither child. check, when not nil, must hold
// too.
func waitBaseline(t *testing.T, namespace string, layers []*gatev1.ClusterHarnessAgentPolicy, check func(*corev1.ConfigMap, *networkingv1.NetworkPolicy) error) (*corev1.ConfigMap, *networkingv1.NetworkPolicy) {
	t.Helper()
	var cm *corev1.ConfigMap
	var np *networkingv1.NetworkPolicy
	testutil.Eventually(t, 20*time.Second, func() error {
		var err error
		if cm, np, err = baselineChildren(t, namespace); err != nil {
			return err
		}
		if len(layers) == 0 {
			if cm != nil || np != nil {
				return fmt.Errorf("the baseline is still there: ConfigMap %t, NetworkPolicy %t", cm != nil, np != nil)
			}
			return nil
		}
		if cm == nil || np == nil {
			return fmt.Errorf("no baseline yet: ConfigMap %t, NetworkPolicy %t", cm != nil, np != nil)
		}
		var names []string
		owners := map[string]metav1.OwnerReference{}
		for _, c := range layers {
			names = append(names, c.Name)
			owners[string(c.UID)] = metav1.OwnerReference{APIVersion: gatev1.GroupVersion.String(), Kind: "ClusterHarnessAgentPolicy", Name: c.Name, UID: c.UID}
		}
		for _, obj := range []client.Object{cm, np} {
			if l := obj.GetLabels(); l[gatev1.LabelManagedBy] != gatev1.ManagedByValue || l[gatev1.LabelBaseline] != "true" {
				return fmt.Errorf("%s has labels %v", obj.GetName(), l)
			}
			got := map[string]metav1.OwnerReference{}
			for _, ref := range obj.GetOwnerReferences() {
				got[string(ref.UID)] = ref
			}
			if !maps.Equal(got, owners) {
				return fmt.Errorf("%s is owned by %v, want %v (no controller)", obj.GetName(), obj.GetOwnerReferences(), slices.Collect(maps.Values(owners)))
			}
		}
		if cm.Annotations[gatev1.AnnotationBootstrapHash] != cm.Data[bootstrap.KeyBootstrapHash] {
			return fmt.Errorf("annotation %s, bundle %s", cm.Annotations[gatev1.AnnotationBootstrapHash], cm.Data[bootstrap.KeyBootstrapHash])
		}
		idx, err := gate.LoadLayersIndex([]byte(cm.Data[gate.LayersFileName]), "")
		if err != nil {
			return fmt.Errorf("the layers index: %w", err)
		}
		var got []string
		for _, l := range idx.Layers {
			got = append(got, l.Name)
		}
		if !slices.Equal(got, names) || idx.Namespaced || idx.Namespace != namespace {
			return fmt.Errorf("the index has layers %v, namespaced %t, namespace %s; want %v, false, %s", got, idx.Namespaced, idx.Namespace, names, namespace)
		}
		if check != nil {
			return check(cm, np)
		}
		return nil
	})
	return cm, np
}

// baselineDecision decides a Bash command as the hook of a pod with these labels decides it
// with the baseline bundle mounted: the bundle's files and the pod's labels in a directory,
// loaded with gate.LoadLayered.
func baselineDecision(t *testing.T, data map[string]string, labels map[string]string, command string) gate.Decision {
	t.Helper()
	dir := t.TempDir()
	files := maps.Clone(data)
	var podLabels strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(&podLabels, "%s=%q\n", k, labels[k])
	}
	files[gate.PodLabelsFile] = podLabels.String()
	files[gate.PodNameFile] = "agent-0"
	for name, v := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := gate.LoadLayered(dir, "")
	if err != nil {
		t.Fatalf("the gate does not load the baseline: %v", err)
	}
	input, err := gate.RenderInput(map[string]any{"command": command})
	if err != nil {
		t.Fatal(err)
	}
	return set.Compile().Decide(&gate.Call{Tool: "Bash", Input: input, Surface: gate.SurfaceHook, Caller: set.Caller})
}

// createClusterPolicy creates a cluster policy and, when the test ends, deletes it and waits
// until the namespaces' baselines no longer carry it.
func createClusterPolicy(t *testing.T, c *gatev1.ClusterHarnessAgentPolicy, namespaces ...string) *gatev1.ClusterHarnessAgentPolicy {
	t.Helper()
	if err := k8sClient.Create(testutil.Context(t, 10*time.Second), c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k8sClient.Delete(testutil.Context(t, 10*time.Second), c); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
		for _, ns := range namespaces {
			testutil.Eventually(t, 20*time.Second, func() error {
				cm, _, err := baselineChildren(t, ns)
				if err == nil && cm != nil && slices.ContainsFunc(cm.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == c.UID }) {
					err = fmt.Errorf("the baseline of %s still carries %s", ns, c.Name)
				}
				return err
			})
		}
	})
	return c
}

// TestBaselinePublished: a namespace a cluster policy selects gets the baseline bundle and
// NetworkPolicy, owned by the cluster policy; the bundle decides with the cluster layers
// alone (a layer's Block for the pods its selector selects, no_policy for a pod no layer
// selects); namespaces it does not select, and the manager's own, get none; status counts the
// selected namespace although it has no namespace policy; relabelling the namespace out removes
// the baseline, and back in publishes it again.
func TestBaselinePublished(t *testing.T) {
	ctx := testutil.Context(t, 2*time.Minute)
	sel := "baseline-" + rand.String(5)
	selected := fleetNamespace(t, "baseline-a-", sel)
	other := fleetNamespace(t, "baseline-b-", "")
	manager := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testManagerNamespace}}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(manager), manager); apierrors.IsNotFound(err) {
		if err := k8sClient.Create(ctx, manager); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	patchLabels(t, manager, map[string]string{"fleet-test": sel})
	t.Cleanup(func() { patchLabels(t, manager, map[string]string{}) })

	c := newClusterPolicy("baseline-"+sel, sel,
		gatev1.Rule{Name: "no-marker", Tools: []string{"bash"}, When: `input.command.contains("cluster-marker")`, Action: gatev1.ActionBlock, Reason: "the platform forbids the marker", Code: "marker"})
	c.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"tier": "untrusted"}}
	c.Spec.PermissionMode = gatev1.PermissionModeAllowReads
	c = createClusterPolicy(t, c, selected.Name)

	cm, _ := waitBaseline(t, selected.Name, []*gatev1.ClusterHarnessAgentPolicy{c}, nil)
	if v, ok := cm.Data[bootstrap.KeySnapshot]; !ok || v != "" {
		t.Errorf("%s must be present and empty, is present=%t %q", bootstrap.KeySnapshot, ok, v)
	}
	if !strings.Contains(cm.Data[bootstrap.KeyHookScript], " --layers") || !strings.Contains(cm.Data[bootstrap.KeyHarnessSettings], `"allow-reads"`) {
		t.Errorf("the baseline's wrapper or posture floor:\n%s\n%s", cm.Data[bootstrap.KeyHookScript], cm.Data[bootstrap.KeyHarnessSettings])
	}
	if !bootstrap.Verify(cm.Data, "", bootstrap.Options{}) || !bootstrap.OnlyBundleKeys(cm.Data) {
		t.Error("the baseline bundle does not verify against its bootstrap hash")
	}
	untrusted := map[string]string{"tier": "untrusted"}
	if d := baselineDecision(t, cm.Data, untrusted, "echo cluster-marker"); d.Verdict != gate.Block || d.Layer != gate.LayerKindCluster+"/"+c.Name || d.Rule != "no-marker" {
		t.Errorf("the cluster Block for a pod it selects: %s by %s rule %s (%s)", d.Verdict, d.Layer, d.Rule, d.Reason)
	}
	if d := baselineDecision(t, cm.Data, untrusted, "echo fine"); d.Verdict != gate.Allow {
		t.Errorf("a call no layer refuses: %s by %s (%s)", d.Verdict, d.Layer, d.Reason)
	}
	if d := baselineDecision(t, cm.Data, map[string]string{"tier": "trusted"}, "echo fine"); d.Verdict != gate.Block || d.Code != gate.CodeNoPolicy {
		t.Errorf("a pod no layer selects: %s %s (%s), want Block %s", d.Verdict, d.Code, d.Reason, gate.CodeNoPolicy)
	}
	waitClusterPolicy(t, c, func(got *gatev1.ClusterHarnessAgentPolicy) error {
		if got.Status.Namespaces != 1 {
			return fmt.Errorf("governs %d namespaces, want 1 (the selected one, which has no namespace policy)", got.Status.Namespaces)
		}
		return nil
	})
	for _, ns := range []string{other.Name, testManagerNamespace} {
		if cm, np, err := baselineChildren(t, ns); err != nil || cm != nil || np != nil {
			t.Errorf("namespace %s has a baseline: ConfigMap %t, NetworkPolicy %t (%v)", ns, cm != nil, np != nil, err)
		}
	}

	patchLabels(t, selected, map[string]string{"fleet-test": "none"})
	waitBaseline(t, selected.Name, nil, nil)
	patchLabels(t, other, map[string]string{"fleet-test": sel})
	waitBaseline(t, other.Name, []*gatev1.ClusterHarnessAgentPolicy{c}, nil)
	patchLabels(t, other, map[string]string{})
	waitBaseline(t, other.Name, nil, nil)
}

// TestBaselineEgress: with no egress ceiling the baseline's NetworkPolicy denies all egress but
// the canary's control port (the injected egress-wait needs it); a ceiling opens what it
// allows, to the pods labelled as the baseline's; a second ceiling narrows it to what both allow;
// the harness network policy follows.
func TestBaselineEgress(t *testing.T) {
	sel := "baseline-egress-" + rand.String(5)
	ns := fleetNamespace(t, "baseline-egress-", sel)
	resolver.set("api.baseline.test", time.Hour, "203.0.113.30")
	resolver.set("other.baseline.test", time.Hour, "203.0.113.40")
	wide := createClusterPolicy(t, newClusterPolicy("wide-"+sel, sel), ns.Name)
	_, np := waitBaseline(t, ns.Name, []*gatev1.ClusterHarnessAgentPolicy{wide}, nil)
	if len(np.Spec.Egress) != 1 || !testCanary.IsRule(np.Spec.Egress[0]) {
		t.Errorf("with no ceiling the NetworkPolicy allows %+v, want the canary's rule alone", np.Spec.Egress)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}) ||
		!maps.Equal(np.Spec.PodSelector.MatchLabels, map[string]string{gatev1.LabelBaseline: "true"}) || len(np.Spec.PodSelector.MatchExpressions) > 0 {
		t.Errorf("the NetworkPolicy selects %+v for %v", np.Spec.PodSelector, np.Spec.PolicyTypes)
	}

	// A ceiling opens its hosts and CIDRs on its ports.
	wide = waitClusterPolicy(t, wide, func(*gatev1.ClusterHarnessAgentPolicy) error { return nil })
	wide.Spec.Egress = &gatev1.EgressSpec{
		AllowedHosts: []gatev1.Hostname{"api.baseline.test", "other.baseline.test"},
		AllowedCIDRs: []gatev1.CIDR{"198.51.100.0/24"},
		Ports:        []int32{443, 8443},
	}
	if err := k8sClient.Update(testutil.Context(t, 10*time.Second), wide); err != nil {
		t.Fatal(err)
	}
	want := func(cidrs []string, ports []int32) func(*corev1.ConfigMap, *networkingv1.NetworkPolicy) error {
		return func(_ *corev1.ConfigMap, np *networkingv1.NetworkPolicy) error {
			gotCIDRs, gotPorts := npDestinations(np)
			if !slices.Equal(gotCIDRs, cidrs) || !slices.Equal(gotPorts, ports) {
				return fmt.Errorf("NetworkPolicy allows %v on %v, want %v on %v", gotCIDRs, gotPorts, cidrs, ports)
			}
			if !slices.ContainsFunc(np.Spec.Egress, testCanary.IsRule) {
				return errors.New("the NetworkPolicy does not allow the canary")
			}
			if np.Annotations[gatev1.AnnotationEgressCeilings] == "" {
				return errors.New("the NetworkPolicy does not name the ceilings it was rendered within")
			}
			return nil
		}
	}
	waitBaseline(t, ns.Name, []*gatev1.ClusterHarnessAgentPolicy{wide}, want([]string{"198.51.100.0/24", "203.0.113.30/32", "203.0.113.40/32"}, []int32{443, 8443}))

	// A second ceiling narrows it to what both allow.
	narrow := newClusterPolicy("narrow-"+sel, sel)
	narrow.Spec.Egress = &gatev1.EgressSpec{
		AllowedHosts: []gatev1.Hostname{"api.baseline.test"},
		AllowedCIDRs: []gatev1.CIDR{"198.51.100.128/25"},
	}
	narrow = createClusterPolicy(t, narrow, ns.Name)
	cm, _ := waitBaseline(t, ns.Name, []*gatev1.ClusterHarnessAgentPolicy{narrow, wide}, want([]string{"198.51.100.128/25", "203.0.113.30/32"}, []int32{443}))
	if hp := cm.Data[bootstrap.KeyHarnessNetworkPolicy]; !strings.Contains(hp, `"api.baseline.test"`) || strings.Contains(hp, "other.baseline.test") || !strings.Contains(hp, `"198.51.100.128/25"`) {
		t.Errorf("the harness network policy is not what both ceilings allow: %s", hp)
	}

	// The children as the API server holds them are what a reconcile computes: a steady state
	// writes nothing.
	r := &BaselineReconciler{Client: k8sClient, Resolver: resolver, Clock: clock.RealClock{}, DNS: egress.DefaultDNSSelector, Canary: testCanary,
		MinResolve: testMinResolve, MaxResolve: testMaxResolve, ManagerNamespace: testManagerNamespace, ClusterCIDRs: testClusterCIDRs}
	o, err := r.gather(testutil.Context(t, 10*time.Second), ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	want2, err := r.compute(ns.Name, o)
	if err != nil {
		t.Fatal(err)
	}
	if !baselineConfigMapMatches(o.configMap, want2.bundle, o.selecting) || !baselineNetworkPolicyMatches(o.networkPolicy, want2, o.selecting) {
		t.Error("the published children do not match what a reconcile computes: every reconcile would write them again")
	}
}

// TestBaselineFollowsClusterPolicies: an edit of a cluster policy's rules reaches the baseline
// (its layer's digest changes), an exception of its rules in the namespace is carried with its
// layer, each cluster policy selecting the namespace owns the children, and deleting them
// removes the baseline once none is left.
func TestBaselineFollowsClusterPolicies(t *testing.T) {
	ctx := testutil.Context(t, 2*time.Minute)
	sel := "baseline-edit-" + rand.String(5)
	ns := fleetNamespace(t, "baseline-edit-", sel)
	first := newClusterPolicy("first-"+sel, sel, gatev1.Rule{Name: "no-marker", Tools: []string{"bash"}, When: `input.command.contains("marker")`, Action: gatev1.ActionBlock, Reason: "marker"})
	first.Spec.Exceptions = &gatev1.ClusterExceptionPolicy{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"fleet-test": sel}},
		MaxDuration:       metav1.Duration{Duration: time.Hour},
	}
	first = createClusterPolicy(t, first, ns.Name)
	second := createClusterPolicy(t, newClusterPolicy("second-"+sel, sel), ns.Name)
	both := []*gatev1.ClusterHarnessAgentPolicy{first, second}
	cm, _ := waitBaseline(t, ns.Name, both, nil)
	digest := layerDigest(t, cm.Data, "", first.Name)
	if d := baselineDecision(t, cm.Data, nil, "echo marker"); d.Verdict != gate.Block || d.Rule != "no-marker" {
		t.Errorf("the first layer's Block: %s by %s", d.Verdict, d.Rule)
	}

	first = waitClusterPolicy(t, first, func(*gatev1.ClusterHarnessAgentPolicy) error { return nil })
	first.Spec.Rules[0].When = `input.command.contains("other-marker")`
	if err := k8sClient.Update(ctx, first); err != nil {
		t.Fatal(err)
	}
	cm, _ = waitBaseline(t, ns.Name, both, func(cm *corev1.ConfigMap, _ *networkingv1.NetworkPolicy) error {
		if got := layerDigest(t, cm.Data, "", first.Name); got == digest {
			return fmt.Errorf("the layer's digest is still %s", got)
		}
		return nil
	})
	if d := baselineDecision(t, cm.Data, nil, "echo marker"); d.Verdict != gate.Allow {
		t.Errorf("after the edit, a call only the old rule refused: %s by %s", d.Verdict, d.Rule)
	}

	gex := &gatev1.GateException{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "lift-marker"},
		Spec: gatev1.GateExceptionSpec{
			PolicyRef: gatev1.ExceptionPolicyRef{Kind: gatev1.ExceptionOfClusterPolicy, Name: first.Name},
			Rules:     []gatev1.RuleName{"no-marker"}, ExpiresAt: metav1.NewTime(time.Now().Add(30 * time.Minute)), Reason: "incident 7",
		},
	}
	if err := k8sClient.Create(ctx, gex); err != nil {
		t.Fatal(err)
	}
	cm, _ = waitBaseline(t, ns.Name, both, func(cm *corev1.ConfigMap, _ *networkingv1.NetworkPolicy) error {
		idx, err := gate.LoadLayersIndex([]byte(cm.Data[gate.LayersFileName]), "")
		if err != nil {
			return err
		}
		for _, l := range idx.Layers {
			if l.Name == first.Name && len(l.Exceptions) == 1 && l.Exceptions[0].Name == gex.Name {
				return nil
			}
		}
		return fmt.Errorf("the layer carries no exception: %+v", idx.Layers)
	})
	if d := baselineDecision(t, cm.Data, nil, "echo other-marker"); d.Verdict != gate.Allow || !slices.Contains(d.Exceptions, gex.Name) {
		t.Errorf("the excepted rule: %s by %s, exceptions %v", d.Verdict, d.Rule, d.Exceptions)
	}

	if err := k8sClient.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	waitBaseline(t, ns.Name, []*gatev1.ClusterHarnessAgentPolicy{first}, nil)
	if err := k8sClient.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitBaseline(t, ns.Name, nil, nil)
}
