package egress

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

var testCanary = Canary{
	Namespace: "gate-system",
	Labels:    map[string]string{"app.kubernetes.io/name": "gate-operator", "app.kubernetes.io/component": "manager"},
	Port:      9444,
}

// applied is the rendered spec as the API server would store it.
func applied(t *testing.T, e Egress) networkingv1.NetworkPolicySpec {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e.Spec)
	if err != nil {
		t.Fatal(err)
	}
	var spec networkingv1.NetworkPolicySpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestEveryPolicyAllowsTheCanaryControl: whatever the spec, the rendered policy allows TCP to
// the manager's canary control port (egress-wait's positive control), deny-all included, and
// the rule names exactly the manager's pods in the manager's namespace.
func TestEveryPolicyAllowsTheCanaryControl(t *testing.T) {
	for name, e := range map[string]gatev1.EgressSpec{
		"deny-all":                   {},
		"hosts":                      {AllowedHosts: []gatev1.Hostname{"github.com"}, Ports: []int32{443}},
		"hosts that resolve nowhere": {AllowedHosts: []gatev1.Hostname{"nowhere.invalid"}},
		"cidrs":                      {AllowedCIDRs: []gatev1.CIDR{"0.0.0.0/0"}, Ports: []int32{22}},
		"cidrs all denied":           {AllowedCIDRs: []gatev1.CIDR{"169.254.0.0/16"}},
	} {
		t.Run(name, func(t *testing.T) {
			hosts := map[string][]netip.Addr{"github.com": {netip.MustParseAddr("140.82.112.3")}}
			spec := applied(t, RenderEgress(&gatev1.HarnessAgentPolicySpec{Egress: e}, hosts, DefaultDNSSelector, testCanary, nil, nil))
			n := 0
			for _, r := range spec.Egress {
				if testCanary.IsRule(r) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d canary control rules, want 1: %+v", n, spec.Egress)
			}
			if ModeOf(spec.Egress, testCanary) != map[bool]gatev1.EgressMode{true: gatev1.EgressModeDenyAll, false: gatev1.EgressModeAllowList}[IsDenyAll(&e)] {
				t.Errorf("ModeOf = %s for %s", ModeOf(spec.Egress, testCanary), name)
			}
		})
	}
}

// TestIsRuleIsExact: a rule that allows more than the control port of the manager's pods is
// not the canary rule (so it is never mistaken for deny-all).
func TestIsRuleIsExact(t *testing.T) {
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(testCanary.Port)
	peer := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: testCanary.Namespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: testCanary.Labels},
	}
	good := networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{peer}, Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}
	if !testCanary.IsRule(good) {
		t.Fatal("the canary rule is not recognised")
	}
	other := intstr.FromInt32(9445)
	anyNS := peer
	anyNS.NamespaceSelector = &metav1.LabelSelector{}
	for name, r := range map[string]networkingv1.NetworkPolicyEgressRule{
		"no ports":       {To: good.To},
		"another port":   {To: good.To, Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &other}}},
		"two ports":      {To: good.To, Ports: append([]networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &other}}, good.Ports...)},
		"no peers":       {Ports: good.Ports},
		"every ns":       {To: []networkingv1.NetworkPolicyPeer{anyNS}, Ports: good.Ports},
		"another peer":   {To: append([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}}, peer), Ports: good.Ports},
		"zero canary ok": good,
	} {
		c := testCanary
		if name == "zero canary ok" {
			c = Canary{}
		}
		if c.IsRule(r) {
			t.Errorf("%s: recognised as the canary rule", name)
		}
	}
}

func TestNoCanaryRendersNoRule(t *testing.T) {
	spec := applied(t, RenderEgress(&gatev1.HarnessAgentPolicySpec{}, nil, DefaultDNSSelector, Canary{}, nil, nil))
	if len(spec.Egress) != 0 {
		t.Fatalf("without a canary, deny-all renders %+v", spec.Egress)
	}
}

// TestHumanLaneRule: the human lane's rule names one confirmer's pods in the policy's namespace
// on one TCP port; a deny-all policy with it is still deny-all, and a rule reaching more (any
// pod of the namespace, another namespace) is not taken for it.
func TestHumanLaneRule(t *testing.T) {
	e := RenderEgress(&gatev1.HarnessAgentPolicySpec{}, nil, DefaultDNSSelector, testCanary, nil, nil)
	e.Spec.WithEgress(HumanLaneRule("coding-agents"))
	spec := applied(t, e)
	if len(spec.Egress) != 2 || !isHumanLaneRule(spec.Egress[1]) {
		t.Fatalf("rules %+v", spec.Egress)
	}
	lane := spec.Egress[1]
	if got := lane.To[0].PodSelector.MatchLabels; got[gatev1.LabelConfirmer] != "coding-agents" || lane.Ports[0].Port.IntValue() != 8080 || *lane.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Fatalf("the rule %+v", lane)
	}
	if ModeOf(spec.Egress, testCanary) != gatev1.EgressModeDenyAll {
		t.Errorf("deny-all with the human lane reads %s", ModeOf(spec.Egress, testCanary))
	}
	anyPod := *lane.DeepCopy()
	anyPod.To[0].PodSelector = &metav1.LabelSelector{}
	elsewhere := *lane.DeepCopy()
	elsewhere.To[0].NamespaceSelector = &metav1.LabelSelector{}
	for name, r := range map[string]networkingv1.NetworkPolicyEgressRule{"any pod": anyPod, "any namespace": elsewhere} {
		if isHumanLaneRule(r) || ModeOf([]networkingv1.NetworkPolicyEgressRule{r}, testCanary) != gatev1.EgressModeAllowList {
			t.Errorf("%s: taken for the human lane's rule", name)
		}
	}
}
