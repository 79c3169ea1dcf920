package egress

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// tcp, udp and named are NetworkPolicy ports.
func tcp(port int32) networkingv1.NetworkPolicyPort {
	p := corev1.ProtocolTCP
	return networkingv1.NetworkPolicyPort{Protocol: &p, Port: new(intstr.FromInt32(port))}
}

func udp(port int32) networkingv1.NetworkPolicyPort {
	p := tcp(port)
	*p.Protocol = corev1.ProtocolUDP
	return p
}

func tcpRange(from, to int32) networkingv1.NetworkPolicyPort {
	p := tcp(from)
	p.EndPort = &to
	return p
}

func named(name string) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Port: new(intstr.FromString(name))}
}

// block is an ipBlock peer.
func block(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

// dnsPeer selects the default cluster DNS pods, as the controller's NetworkPolicies do.
func dnsPeer() networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: DefaultDNSSelector.Namespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: DefaultDNSSelector.Labels},
	}
}

func rule(to []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) networkingv1.NetworkPolicyEgressRule {
	return networkingv1.NetworkPolicyEgressRule{To: to, Ports: ports}
}

func ceiling(name string, cidrs []gatev1.CIDR, ports ...int32) Ceiling {
	return Ceiling{Policy: name, Spec: &gatev1.EgressSpec{AllowedCIDRs: cidrs, Ports: ports}}
}

// TestBeyond: a tenant NetworkPolicy's egress rules are judged against the ceilings: each
// finding names the field at fault and what the ceiling allows instead, and a rule within every
// ceiling (an ipBlock inside its CIDRs excepting every denied range inside it, on its TCP ports,
// or the cluster DNS pods on port 53) has none.
func TestBeyond(t *testing.T) {
	narrow := ceiling("platform", []gatev1.CIDR{"203.0.113.0/24"})
	open := ceiling("open", []gatev1.CIDR{"0.0.0.0/0"})
	linkLocalish := ceiling("platform", []gatev1.CIDR{"169.0.0.0/8"})
	withDenied := Ceiling{Policy: "platform", Spec: &gatev1.EgressSpec{AllowedCIDRs: []gatev1.CIDR{"203.0.113.0/24"}, DeniedCIDRs: []gatev1.CIDR{"203.0.113.128/25"}}}
	wide := ceiling("wide", []gatev1.CIDR{"203.0.113.0/24"}, 443, 8443)
	tight := ceiling("tight", []gatev1.CIDR{"203.0.113.0/25"}, 443)
	for _, tc := range []struct {
		name     string
		rules    []networkingv1.NetworkPolicyEgressRule
		ceilings []Ceiling
		dns      DNSSelector
		// want holds, in order, a phrase of each finding.
		want []string
	}{
		{name: "no ceiling judges nothing", rules: []networkingv1.NetworkPolicyEgressRule{rule(nil)}},
		{name: "inside the ceiling on its port", ceilings: []Ceiling{narrow},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/25")}, tcp(443))}},
		{name: "the whole ceiling, a port given without protocol (TCP)", ceilings: []Ceiling{narrow},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/24")}, networkingv1.NetworkPolicyPort{Port: new(intstr.FromInt32(443))})}},
		{name: "a wide CIDR", ceilings: []Ceiling{narrow},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("0.0.0.0/0")}, tcp(443))},
			want:  []string{"egress[0].to[0].ipBlock.cidr 0.0.0.0/0 is outside the ceiling of platform, which allows 203.0.113.0/24"}},
		{name: "every destination (no to)", ceilings: []Ceiling{narrow},
			rules: []networkingv1.NetworkPolicyEgressRule{rule(nil, tcp(443))},
			want:  []string{"egress[0] allows every destination; the ceiling of platform allows only 203.0.113.0/24"}},
		{name: "the default route without the metadata ranges excepted", ceilings: []Ceiling{open},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("0.0.0.0/0")}, tcp(443))},
			want: []string{
				"egress[0].to[0].ipBlock.cidr 0.0.0.0/0 contains the denied range 100.100.100.200/32",
				"contains the denied range 168.63.129.16/32",
				"contains the denied range 169.254.0.0/16, which its except list must name",
				"contains the denied range 169.254.169.254/32",
				"contains the denied range 192.0.0.192/32",
			}},
		{name: "the default route with the metadata ranges excepted", ceilings: []Ceiling{open},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{
				block("0.0.0.0/0", "169.254.0.0/16", "100.100.100.200/32", "168.63.129.16/32", "192.0.0.192/32"),
			}, tcp(443))}},
		{name: "a link-local range left in", ceilings: []Ceiling{linkLocalish},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("169.0.0.0/8")}, tcp(443))},
			want: []string{
				"egress[0].to[0].ipBlock.cidr 169.0.0.0/8 contains the denied range 169.254.0.0/16",
				"egress[0].to[0].ipBlock.cidr 169.0.0.0/8 contains the denied range 169.254.169.254/32",
			}},
		{name: "a link-local range excepted (the /32 inside it too)", ceilings: []Ceiling{linkLocalish},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("169.0.0.0/8", "169.254.0.0/16")}, tcp(443))}},
		{name: "a CIDR inside a denied range", ceilings: []Ceiling{linkLocalish},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("169.254.1.0/24")}, tcp(443))},
			want:  []string{"egress[0].to[0].ipBlock.cidr 169.254.1.0/24 lies in the denied range 169.254.0.0/16"}},
		{name: "the ceiling's own denied range left in", ceilings: []Ceiling{withDenied},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/24")}, tcp(443))},
			want:  []string{"egress[0].to[0].ipBlock.cidr 203.0.113.0/24 contains the denied range 203.0.113.128/25"}},
		{name: "the ceiling's own denied range excepted", ceilings: []Ceiling{withDenied},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/24", "203.0.113.128/25")}, tcp(443))}},
		{name: "UDP", ceilings: []Ceiling{narrow},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/24")}, udp(443))},
			want:  []string{"egress[0].ports[0] is UDP; the ceiling of platform allows TCP 443"}},
		{name: "no ports (every port)", ceilings: []Ceiling{narrow},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/24")})},
			want:  []string{"egress[0] allows every port; the ceiling of platform allows TCP 443"}},
		{name: "a TCP port without a number (every TCP port)", ceilings: []Ceiling{narrow},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/24")}, networkingv1.NetworkPolicyPort{Protocol: tcp(443).Protocol})},
			want:  []string{"egress[0].ports[0] allows every TCP port"}},
		{name: "another TCP port", ceilings: []Ceiling{narrow},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/24")}, tcp(443), tcp(22))},
			want:  []string{"egress[0].ports[1] allows TCP 22; the ceiling of platform allows TCP 443"}},
		{name: "a named port", ceilings: []Ceiling{narrow},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/24")}, named("https"))},
			want:  []string{`egress[0].ports[0] names the port "https", which cannot be judged against a ceiling`}},
		{name: "a port range beyond the ceiling's ports", ceilings: []Ceiling{wide},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/24")}, tcpRange(443, 8443))},
			want:  []string{"egress[0].ports[0] allows TCP 444; the ceiling of wide allows TCP 443, 8443"}},
		{name: "a port range of the ceiling's ports", ceilings: []Ceiling{ceiling("platform", []gatev1.CIDR{"203.0.113.0/24"}, 443, 444, 445)},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/24")}, tcpRange(443, 445))}},
		{name: "the cluster DNS pods on port 53", ceilings: []Ceiling{narrow},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{dnsPeer()}, udp(53), tcp(53))}},
		{name: "the cluster DNS pods on another port", ceilings: []Ceiling{narrow},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{dnsPeer()}, tcp(80))},
			want: []string{
				"egress[0].to[0] selects pods or namespaces, which are beyond the ceiling of platform",
				"egress[0].ports[0] allows TCP 80",
			}},
		{name: "the default DNS pods under another cluster DNS", ceilings: []Ceiling{narrow}, dns: DNSSelector{Namespace: "dns", Labels: map[string]string{"app": "coredns"}},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{dnsPeer()}, udp(53))},
			want: []string{
				"egress[0].to[0] selects pods or namespaces",
				"egress[0].ports[0] is UDP",
			}},
		{name: "a pod peer", ceilings: []Ceiling{narrow},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}, tcp(443))},
			want:  []string{"egress[0].to[0] selects pods or namespaces, which are beyond the ceiling of platform (only the cluster DNS pods on port 53 are not)"}},
		{name: "a namespace peer beside the DNS pods", ceilings: []Ceiling{narrow},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{dnsPeer(), {NamespaceSelector: &metav1.LabelSelector{}}}, udp(53))},
			want: []string{
				"egress[0].to[1] selects pods or namespaces",
				"egress[0].ports[0] is UDP",
			}},
		{name: "two ceilings: within both", ceilings: []Ceiling{wide, tight},
			rules: []networkingv1.NetworkPolicyEgressRule{rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/26")}, tcp(443))}},
		{name: "two ceilings: only the first allows the destination and the port", ceilings: []Ceiling{wide, tight},
			rules: []networkingv1.NetworkPolicyEgressRule{
				rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/25")}, tcp(443)),
				rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.128/25")}, tcp(443)),
				rule([]networkingv1.NetworkPolicyPeer{block("203.0.113.0/25")}, tcp(8443)),
			},
			want: []string{
				"egress[1].to[0].ipBlock.cidr 203.0.113.128/25 is outside the ceiling of tight, wide, which allows 203.0.113.0/25",
				"egress[2].ports[0] allows TCP 8443; the ceiling of tight, wide allows TCP 443",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dns := tc.dns
			if dns.Namespace == "" {
				dns = DefaultDNSSelector
			}
			got := Beyond(tc.rules, tc.ceilings, dns)
			if len(got) != len(tc.want) {
				t.Fatalf("findings %q, want %d saying %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("finding %d is %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}
