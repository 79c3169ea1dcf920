package egress

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// MetadataCIDRs are the metadata, credential and platform endpoints that clouds and
// Kubernetes distributions put next to a pod, denied whatever the policy says: carved out of
// every allowed CIDR and never allowed as a resolved host address. docs/egress-carve-outs.md
// lists each with its source; a test keeps the two in step.
var MetadataCIDRs = []string{
	"169.254.0.0/16",     // IPv4 link-local (RFC 3927): AWS, GCP, Azure, OCI, OpenStack metadata; ECS task metadata; EKS Pod Identity 169.254.170.23
	"169.254.169.254/32", // the instance metadata address of most clouds, named on its own so it shows in every except list
	"100.100.100.200/32", // Alibaba Cloud ECS instance metadata
	"168.63.129.16/32",   // Azure WireServer (host platform: extension config, health, DNS)
	"192.0.0.192/32",     // Oracle Cloud@Customer (and OCI Classic) instance metadata
	"fe80::/10",          // IPv6 link-local (RFC 4291): OpenStack metadata fe80::a9fe:a9fe
	"fd00:ec2::23/128",   // EKS Pod Identity Agent over IPv6
	"fd00:ec2::254/128",  // AWS instance metadata (IMDS) over IPv6
	"fd20:ce::254/128",   // Google Compute Engine metadata server over IPv6
}

// DefaultClusterCIDRs is the default of the manager's --service-cidrs and --pod-cidrs: the
// private ranges (RFC 1918, RFC 6598 shared space, RFC 4193 unique local), which hold the
// Service and Pod networks of kubeadm, kind, k3s, EKS, AKS and the common CNIs. An allowed host
// never resolves into them; an allowed CIDR may still cover them.
const DefaultClusterCIDRs = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"

// ParsePrefixes parses a comma-separated list of CIDRs, such as the manager's flags take.
func ParsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return canonical(out), nil
}

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
	var ps []netip.Prefix
	for _, s := range raw {
		if p, err := netip.ParsePrefix(s); err == nil {
			ps = append(ps, p)
		}
	}
	return canonical(ps)
}

// canonical unmaps, masks, sorts and de-duplicates prefixes.
func canonical(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
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
	// Dropped are the addresses and allowed CIDRs left out: addresses in Rejected, and CIDRs a
	// denied range covers.
	Dropped []string
	// Rejected are the resolved addresses that may not become destinations, by host.
	Rejected []RejectedAddress
}

// RejectedAddress is a DNS answer for an allowed host that points where a name may not lead.
// DNS answers are attacker-influenced (a record can be changed, or spoofed), so a name never
// opens loopback, link-local, multicast, a denied range or the cluster's own networks.
type RejectedAddress struct {
	Host string
	Addr netip.Addr
	// Why says what the address is, e.g. "loopback" or "in the denied range fe80::/10".
	Why string
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8") // RFC 1122: "this host on this network"
	broadcast   = netip.MustParseAddr("255.255.255.255")
	nat64       = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052 well-known prefix
)

// rejectAnswer says why a resolved address may not become a destination, or "" when it may.
// allowed are the allowed CIDRs: an address they cover is reachable anyway, so the cluster
// ranges do not reject it.
func rejectAnswer(a netip.Addr, denied, cluster, allowed []netip.Prefix) string {
	if nat64.Contains(a) {
		// A NAT64 gateway translates it to the IPv4 address in its last 32 bits.
		b := a.As16()
		if why := rejectAnswer(netip.AddrFrom4([4]byte(b[12:])), denied, cluster, allowed); why != "" {
			return why + ", through NAT64"
		}
	}
	switch {
	case a.IsUnspecified() || thisNetwork.Contains(a):
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast():
		return "multicast"
	case a == broadcast:
		return "broadcast"
	}
	p := netip.PrefixFrom(a, a.BitLen())
	for _, d := range denied {
		if within(p, d) {
			return "in the denied range " + d.String()
		}
	}
	if slices.ContainsFunc(allowed, func(c netip.Prefix) bool { return within(p, c) }) {
		return ""
	}
	for _, c := range cluster {
		if within(p, c) {
			return "in the cluster range " + c.String()
		}
	}
	return ""
}

// RenderEgress renders the egress NetworkPolicy of a policy from its spec and the addresses its
// hosts resolved to. With no hosts and no CIDRs it denies all egress, DNS included. Otherwise
// it allows DNS to the cluster DNS pods only, and TCP on the spec's ports to the resolved
// addresses (as /32 and /128) and the allowed CIDRs, with every denied range carved out. A
// resolved address that is not a global unicast address, or lies in a denied range or (unless
// an allowed CIDR covers it) in the cluster's Service and Pod ranges, is rejected. The output
// is sorted, so unchanged inputs render identical specs.
func RenderEgress(spec *gatev1.HarnessAgentPolicySpec, hostAddrs map[string][]netip.Addr, dns DNSSelector, cluster []netip.Prefix) Egress {
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

	var cidrs, droppedCIDRs []netip.Prefix
	raw := make([]string, 0, len(spec.Egress.AllowedCIDRs))
	for _, c := range spec.Egress.AllowedCIDRs {
		raw = append(raw, string(c))
	}
	for _, p := range canonicalPrefixes(raw) {
		if slices.ContainsFunc(denied, func(d netip.Prefix) bool { return within(p, d) }) {
			droppedCIDRs = append(droppedCIDRs, p)
			continue
		}
		cidrs = append(cidrs, p)
	}

	var hosts []netip.Prefix
	for _, host := range slices.Sorted(maps.Keys(hostAddrs)) {
		for _, a := range hostAddrs[host] {
			a = a.Unmap()
			if why := rejectAnswer(a, denied, cluster, cidrs); why != "" {
				r := RejectedAddress{Host: host, Addr: a, Why: why}
				if !slices.Contains(out.Rejected, r) {
					out.Rejected = append(out.Rejected, r)
					out.Dropped = append(out.Dropped, a.String())
				}
				continue
			}
			hosts = append(hosts, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	slices.SortFunc(hosts, comparePrefix)
	hosts = slices.Compact(hosts)
	out.Addresses = len(hosts)
	for _, p := range droppedCIDRs {
		out.Dropped = append(out.Dropped, p.String())
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
