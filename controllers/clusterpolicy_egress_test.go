package controllers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/testutil"
)

// npDestinations are the ipBlock CIDRs and TCP ports a rendered egress NetworkPolicy allows
// (the canary's and DNS rules left out), sorted.
func npDestinations(np *networkingv1.NetworkPolicy) (cidrs []string, ports []int32) {
	for _, rule := range np.Spec.Egress {
		if len(rule.To) == 0 || rule.To[0].IPBlock == nil {
			continue
		}
		for _, peer := range rule.To {
			cidrs = append(cidrs, peer.IPBlock.CIDR)
		}
		for _, p := range rule.Ports {
			ports = append(ports, p.Port.IntVal)
		}
	}
	slices.Sort(cidrs)
	slices.Sort(ports)
	return cidrs, ports
}

// TestEgressCeilingBoundsNamespacePolicies: a cluster policy's egress ceiling narrows the
// NetworkPolicy of a namespace policy in a namespace it selects to what both allow, the status
// names what was cut, a tighter ceiling reaches the NetworkPolicy, and removing the cluster
// policy gives the namespace policy its own egress back. A namespace it does not select keeps
// its own egress throughout.
func TestEgressCeilingBoundsNamespacePolicies(t *testing.T) {
	ctx := testutil.Context(t, 2*time.Minute)
	sel := "ceiling-" + rand.String(5)
	selected := fleetNamespace(t, "ceiling-a-", sel)
	other := fleetNamespace(t, "ceiling-b-", "")
	resolver.set("api.ceiling.test", time.Hour, "203.0.113.10")
	resolver.set("paste.ceiling.test", time.Hour, "203.0.113.20")
	egressSpec := gatev1.EgressSpec{
		AllowedHosts: []gatev1.Hostname{"api.ceiling.test", "paste.ceiling.test"},
		AllowedCIDRs: []gatev1.CIDR{"198.51.100.10/32"},
		Ports:        []int32{443, 8443},
	}
	pa, pb := newPolicy(selected.Name, "agents"), newPolicy(other.Name, "agents")
	for _, p := range []*gatev1.HarnessAgentPolicy{pa, pb} {
		p.Spec.Egress = egressSpec
		if err := k8sClient.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	own := []string{"198.51.100.10/32", "203.0.113.10/32", "203.0.113.20/32"}
	waitEgress := func(p *gatev1.HarnessAgentPolicy, cidrs []string, ports []int32) *networkingv1.NetworkPolicy {
		t.Helper()
		var np *networkingv1.NetworkPolicy
		testutil.Eventually(t, 20*time.Second, func() error {
			np = &networkingv1.NetworkPolicy{}
			if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name + "-egress"}, np); err != nil {
				return err
			}
			gotCIDRs, gotPorts := npDestinations(np)
			if !slices.Equal(gotCIDRs, cidrs) || !slices.Equal(gotPorts, ports) {
				return fmt.Errorf("NetworkPolicy allows %v on %v, want %v on %v", gotCIDRs, gotPorts, cidrs, ports)
			}
			return nil
		})
		return np
	}
	waitEgress(pa, own, []int32{443, 8443})

	c := newClusterPolicy("ceiling-"+sel, sel)
	c.Spec.Egress = &gatev1.EgressSpec{
		AllowedHosts: []gatev1.Hostname{"api.ceiling.test"},
		AllowedCIDRs: []gatev1.CIDR{"198.51.100.0/24"},
		Ports:        []int32{443},
	}
	if err := k8sClient.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeClusterPolicy(t, c, pa, pb) })

	np := waitEgress(pa, []string{"198.51.100.10/32", "203.0.113.10/32"}, []int32{443})
	if np.Annotations[gatev1.AnnotationEgressCeilings] == "" {
		t.Errorf("the narrowed NetworkPolicy does not record its ceilings: %v", np.Annotations)
	}
	got := waitCondition(t, pa, gatev1.ConditionEgressEnforced, metav1.ConditionFalse, gatev1.ReasonOutsideCeiling)
	msg := conditionMessage(got, gatev1.ConditionEgressEnforced)
	for _, want := range []string{"paste.ceiling.test (203.0.113.20)", "port 8443", c.Name} {
		if !strings.Contains(msg, want) {
			t.Errorf("the EgressEnforced message does not name %q: %s", want, msg)
		}
	}
	if eg := got.Status.Egress; eg == nil || !slices.Equal(eg.Ceilings, []string{c.Name}) || len(eg.OutsideCeiling) != 2 {
		t.Errorf("status.egress does not describe the ceiling: %+v", eg)
	}
	waitEgress(pb, own, []int32{443, 8443})

	// A ceiling of nothing denies all egress under it.
	c = waitClusterPolicy(t, c, func(*gatev1.ClusterHarnessAgentPolicy) error { return nil })
	c.Spec.Egress = &gatev1.EgressSpec{Ports: []int32{443}}
	if err := k8sClient.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if p := getPolicy(t, pa); p.Status.Egress == nil || p.Status.Egress.Mode != gatev1.EgressModeDenyAll {
			return fmt.Errorf("status.egress %+v, want DenyAll", p.Status.Egress)
		}
		return nil
	})
	waitEgress(pa, nil, nil)

	// Without the cluster policy, the namespace policy's own egress is back, unannotated.
	if err := k8sClient.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	np = waitEgress(pa, own, []int32{443, 8443})
	if _, ok := np.Annotations[gatev1.AnnotationEgressCeilings]; ok {
		t.Errorf("a NetworkPolicy no ceiling bounds still carries %s", gatev1.AnnotationEgressCeilings)
	}
	waitCondition(t, pa, gatev1.ConditionEgressEnforced, metav1.ConditionTrue, gatev1.ReasonEnforced)
}

func conditionMessage(p *gatev1.HarnessAgentPolicy, typ string) string {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}
