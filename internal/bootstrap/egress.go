package bootstrap

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// MetadataCIDRs are the cloud metadata ranges, denied whatever the policy says.
var MetadataCIDRs = []string{"169.254.0.0/16", "169.254.169.254/32", "fd00:ec2::254/128"}

// DNSSelector selects the cluster DNS pods, the only DNS an allow-listed sandbox may use.
type DNSSelector struct {
	// Namespace is the DNS pods' namespace; Labels their labels.
	Namespace string
	Labels    map[string]string
}

// DefaultDNSSelector is kube-system's k8s-app=kube-dns, as kubeadm, kind and most managed
// clusters label CoreDNS.
var DefaultDNSSelector = DNSSelector{Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-dns"}}

// IsDenyAll reports whether the egress spec denies everything: no hosts and no CIDRs.
func IsDenyAll(e *gatev1.EgressSpec) bool {
	return len(e.AllowedHosts) == 0 && len(e.AllowedCIDRs) == 0
}

// DeniedCIDRs returns the spec's denied CIDRs and the metadata ranges, canonical, sorted and
// without duplicates.
func DeniedCIDRs(e *gatev1.EgressSpec) []string {
	var out []string
	for _, p := range deniedPrefixes(e) {
		out = append(out, p.String())
	}
	return out
}

func deniedPrefixes(e *gatev1.EgressSpec) []netip.Prefix {
	raw := append([]string{}, MetadataCIDRs...)
	for _, c := range e.DeniedCIDRs {
		raw = append(raw, string(c))
	}
	return canonicalPrefixes(raw)
}

// canonicalPrefixes parses, masks, sorts and de-duplicates CIDRs; unparsable ones (the schema
// rejects them) are skipped.
func canonicalPrefixes(raw []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range raw {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			continue
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out)
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// within reports whether inner lies inside outer (same family, outer no longer than inner).
func within(inner, outer netip.Prefix) bool {
	return inner.Addr().Is4() == outer.Addr().Is4() && outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
}

// Egress is a rendered egress NetworkPolicy spec and what rendering left out.
type Egress struct {
	Spec *networkingv1ac.NetworkPolicySpecApplyConfiguration
	// Mode is DenyAll or AllowList.
	Mode gatev1.EgressMode
	// Addresses is how many host addresses the policy allows.
	Addresses int
	// Dropped are addresses and allowed CIDRs left out because a denied range covers them.
	Dropped []string
}

// RenderEgress renders the egress NetworkPolicy of a policy from its spec and the addresses its
// hosts resolved to. With no hosts and no CIDRs it denies all egress, DNS included. Otherwise
// it allows DNS to the cluster DNS pods only, and TCP on the spec's ports to the resolved
// addresses (as /32 and /128) and the allowed CIDRs, with every denied range carved out. The
// output is sorted, so unchanged inputs render identical specs.
func RenderEgress(spec *gatev1.HarnessAgentPolicySpec, addrs []netip.Addr, dns DNSSelector) Egress {
	np := networkingv1ac.NetworkPolicySpec().
		WithPodSelector(labelSelector(spec.PodSelector)).
		WithPolicyTypes("Egress")
	if IsDenyAll(&spec.Egress) {
		// An empty egress list, not an absent one: SSA then owns and keeps it empty.
		np.Egress = []networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration{}
		return Egress{Spec: np, Mode: gatev1.EgressModeDenyAll}
	}
	denied := deniedPrefixes(&spec.Egress)
	out := Egress{Mode: gatev1.EgressModeAllowList}

	dnsPeer := networkingv1ac.NetworkPolicyPeer().
		WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{corev1.LabelMetadataName: dns.Namespace})).
		WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(dns.Labels))
	np.WithEgress(networkingv1ac.NetworkPolicyEgressRule().
		WithTo(dnsPeer).
		WithPorts(port(corev1.ProtocolUDP, 53), port(corev1.ProtocolTCP, 53)))

	var hosts []netip.Prefix
	for _, a := range addrs {
		a = a.Unmap()
		p := netip.PrefixFrom(a, a.BitLen())
		if slices.ContainsFunc(denied, func(d netip.Prefix) bool { return within(p, d) }) {
			out.Dropped = append(out.Dropped, a.String())
			continue
		}
		hosts = append(hosts, p)
	}
	slices.SortFunc(hosts, comparePrefix)
	hosts = slices.Compact(hosts)
	out.Addresses = len(hosts)

	var cidrs []netip.Prefix
	raw := make([]string, 0, len(spec.Egress.AllowedCIDRs))
	for _, c := range spec.Egress.AllowedCIDRs {
		raw = append(raw, string(c))
	}
	for _, p := range canonicalPrefixes(raw) {
		if slices.ContainsFunc(denied, func(d netip.Prefix) bool { return within(p, d) }) {
			out.Dropped = append(out.Dropped, p.String())
			continue
		}
		cidrs = append(cidrs, p)
	}

	// Hosts that resolved to nothing and CIDRs that are all denied leave no destination; a
	// rule without destinations would allow every destination, so then there is none.
	dests := slices.Concat(hosts, cidrs)
	slices.SortFunc(dests, comparePrefix)
	dests = slices.Compact(dests)
	if len(dests) > 0 {
		rule := networkingv1ac.NetworkPolicyEgressRule()
		for _, d := range dests {
			block := networkingv1ac.IPBlock().WithCIDR(d.String())
			for _, x := range denied {
				if x != d && within(x, d) {
					block.WithExcept(x.String())
				}
			}
			rule.WithTo(networkingv1ac.NetworkPolicyPeer().WithIPBlock(block))
		}
		ports := slices.Clone(spec.Egress.Ports)
		if len(ports) == 0 {
			ports = []int32{443}
		}
		slices.Sort(ports)
		for _, p := range slices.Compact(ports) {
			rule.WithPorts(port(corev1.ProtocolTCP, p))
		}
		np.WithEgress(rule)
	}
	out.Spec = np
	return out
}

func port(proto corev1.Protocol, n int32) *networkingv1ac.NetworkPolicyPortApplyConfiguration {
	return networkingv1ac.NetworkPolicyPort().WithProtocol(proto).WithPort(intstr.FromInt32(n))
}

// labelSelector converts a LabelSelector into its apply configuration.
func labelSelector(s metav1.LabelSelector) *metav1ac.LabelSelectorApplyConfiguration {
	ac := metav1ac.LabelSelector()
	if s.MatchLabels != nil {
		ac.WithMatchLabels(s.MatchLabels)
	}
	for _, r := range s.MatchExpressions {
		ac.WithMatchExpressions(metav1ac.LabelSelectorRequirement().
			WithKey(r.Key).WithOperator(r.Operator).WithValues(r.Values...))
	}
	return ac
}
