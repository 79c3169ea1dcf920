package egress

import (
	"maps"
	"net/netip"
	"slices"

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
	// Ceilings name the cluster policies whose egress ceiling bounds the policy.
	Ceilings []string
	// OutsideCeiling are the spec's destinations and ports a ceiling left out.
	OutsideCeiling []string
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

// RenderEgress renders the egress NetworkPolicy of a policy from its spec and the addresses its
// hosts resolved to, within the egress ceilings of the cluster policies selecting its namespace.
// Every policy allows the canary's control port (egress-wait's positive control; Canary). With no
// hosts and no CIDRs, or under a ceiling that allows nothing, it denies all other egress, DNS
// included. Otherwise it allows DNS to the cluster DNS pods only, and TCP on the spec's ports to
// the resolved addresses (as /32 and /128) and the allowed CIDRs, narrowed to what every ceiling
// allows (destinations and ports), with every denied range (the spec's, the ceilings' and the
// metadata ranges) carved out. A resolved address that is not a global unicast address, or lies
// in a denied range or (unless an allowed CIDR covers it) in the cluster's Service and Pod
// ranges, is rejected. The output is sorted, so unchanged inputs render identical specs.
func RenderEgress(spec *gatev1.HarnessAgentPolicySpec, hostAddrs map[string][]netip.Addr, dns DNSSelector, canary Canary, cluster []netip.Prefix, ceilings []Ceiling) Egress {
	np := networkingv1ac.NetworkPolicySpec().
		WithPodSelector(labelSelector(spec.PodSelector)).
		WithPolicyTypes("Egress")
	// An empty egress list, not an absent one: SSA then owns and keeps it empty.
	np.Egress = []networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration{}
	if canary.enabled() {
		np.WithEgress(canary.rule())
	}
	out := Egress{Spec: np, Mode: gatev1.EgressModeDenyAll, Ceilings: ceilingNames(ceilings)}
	if IsDenyAll(&spec.Egress) {
		return out
	}
	for _, c := range ceilings {
		if IsDenyAll(c.Spec) {
			out.OutsideCeiling = []string{"every destination: the ceiling of ClusterHarnessAgentPolicy " + c.Policy + " allows none"}
			return out
		}
	}
	denied := deniedWithin(&spec.Egress, ceilings)
	out.Mode = gatev1.EgressModeAllowList

	dnsPeer := networkingv1ac.NetworkPolicyPeer().
		WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{corev1.LabelMetadataName: dns.Namespace})).
		WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(dns.Labels))
	np.WithEgress(networkingv1ac.NetworkPolicyEgressRule().
		WithTo(dnsPeer).
		WithPorts(port(corev1.ProtocolUDP, 53), port(corev1.ProtocolTCP, 53)))

	var cidrs, droppedCIDRs []netip.Prefix
	for _, p := range allowedPrefixes(&spec.Egress) {
		if slices.ContainsFunc(denied, func(d netip.Prefix) bool { return within(p, d) }) {
			droppedCIDRs = append(droppedCIDRs, p)
			continue
		}
		cidrs = append(cidrs, p)
	}

	hosts := out.acceptHosts(hostAddrs, denied, cluster, cidrs)
	for _, p := range droppedCIDRs {
		out.Dropped = append(out.Dropped, p.String())
	}

	dests, ports, outside := withinCeilings(&spec.Egress, hosts, cidrs, ceilings, denied, cluster)
	out.OutsideCeiling = outside
	var allowedHosts []netip.Prefix
	for _, ps := range hosts {
		for _, p := range ps {
			if slices.ContainsFunc(dests, func(d netip.Prefix) bool { return within(p, d) }) {
				allowedHosts = append(allowedHosts, p)
			}
		}
	}
	slices.SortFunc(allowedHosts, comparePrefix)
	out.Addresses = len(slices.Compact(allowedHosts))

	// Hosts that resolved to nothing, CIDRs that are all denied and ceilings that leave nothing
	// leave no destination; a rule without destinations would allow every destination, so then
	// there is none.
	if len(dests) > 0 && len(ports) > 0 {
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
		for _, p := range ports {
			rule.WithPorts(port(corev1.ProtocolTCP, p))
		}
		np.WithEgress(rule)
	}
	return out
}

// acceptHosts returns the hosts' addresses that may become destinations, as prefixes by host,
// and records the others in e.Rejected and e.Dropped.
func (e *Egress) acceptHosts(hostAddrs map[string][]netip.Addr, denied, cluster, cidrs []netip.Prefix) map[string][]netip.Prefix {
	hosts := map[string][]netip.Prefix{}
	for _, host := range slices.Sorted(maps.Keys(hostAddrs)) {
		for _, a := range hostAddrs[host] {
			a = a.Unmap()
			if why := rejectAnswer(a, denied, cluster, cidrs); why != "" {
				r := RejectedAddress{Host: host, Addr: a, Why: why}
				if !slices.Contains(e.Rejected, r) {
					e.Rejected = append(e.Rejected, r)
					e.Dropped = append(e.Dropped, a.String())
				}
				continue
			}
			hosts[host] = append(hosts[host], netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return hosts
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
