package egress

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// Ceiling is the egress ceiling of a ClusterHarnessAgentPolicy: the destinations and ports that
// no NetworkPolicy the operator renders in a namespace it selects may go beyond, and the ranges
// carved out of every destination there (docs/fleet.md).
type Ceiling struct {
	// Policy names the ClusterHarnessAgentPolicy.
	Policy string
	Spec   *gatev1.EgressSpec
	// HostAddrs are the addresses the ceiling's allowedHosts resolved to, by host.
	HostAddrs map[string][]netip.Addr
}

// destinations are the prefixes a ceiling allows: its allowed CIDRs that no denied range
// covers, and its hosts' addresses that a name may lead to (rejectAnswer).
func (c Ceiling) destinations(denied, cluster []netip.Prefix) []netip.Prefix {
	var cidrs []netip.Prefix
	for _, p := range allowedPrefixes(c.Spec) {
		if !slices.ContainsFunc(denied, func(d netip.Prefix) bool { return within(p, d) }) {
			cidrs = append(cidrs, p)
		}
	}
	out := slices.Clone(cidrs)
	for _, host := range slices.Sorted(maps.Keys(c.HostAddrs)) {
		for _, a := range c.HostAddrs[host] {
			a = a.Unmap()
			if rejectAnswer(a, denied, cluster, cidrs) == "" {
				out = append(out, netip.PrefixFrom(a, a.BitLen()))
			}
		}
	}
	return outermost(out)
}

// allowedPrefixes are an egress spec's allowed CIDRs, canonical.
func allowedPrefixes(e *gatev1.EgressSpec) []netip.Prefix {
	raw := make([]string, 0, len(e.AllowedCIDRs))
	for _, c := range e.AllowedCIDRs {
		raw = append(raw, string(c))
	}
	return canonicalPrefixes(raw)
}

// portsOf are an egress spec's TCP ports, sorted: its schema default (443) when it lists none.
func portsOf(e *gatev1.EgressSpec) []int32 {
	ports := slices.Clone(e.Ports)
	if len(ports) == 0 {
		ports = []int32{443}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// ceilingPorts are those of ports that every ceiling allows.
func ceilingPorts(ports []int32, ceilings []Ceiling) []int32 {
	for _, c := range ceilings {
		allowed := portsOf(c.Spec)
		ports = slices.DeleteFunc(ports, func(p int32) bool { return !slices.Contains(allowed, p) })
	}
	return ports
}

// intersect returns the addresses in both sets of prefixes. Two prefixes either nest or are
// disjoint, so the intersection is the inner prefix of every nesting pair.
func intersect(a, b []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, x := range a {
		for _, y := range b {
			switch {
			case within(x, y):
				out = append(out, x)
			case within(y, x):
				out = append(out, y)
			}
		}
	}
	return outermost(out)
}

// outermost sorts and de-duplicates prefixes and drops those inside another of the set.
func outermost(ps []netip.Prefix) []netip.Prefix {
	ps = canonical(ps)
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if !slices.ContainsFunc(ps, func(q netip.Prefix) bool { return q != p && within(p, q) }) {
			out = append(out, p)
		}
	}
	return out
}

// deniedWithin is every range a namespace policy's NetworkPolicy carves out: its own denied
// CIDRs, the metadata ranges, and every ceiling's denied CIDRs.
func deniedWithin(e *gatev1.EgressSpec, ceilings []Ceiling) []netip.Prefix {
	denied := deniedPrefixes(e)
	for _, c := range ceilings {
		denied = append(denied, deniedPrefixes(c.Spec)...)
	}
	return canonical(denied)
}

// ceilingNames are the ceilings' policies, sorted.
func ceilingNames(ceilings []Ceiling) []string {
	names := make([]string, 0, len(ceilings))
	for _, c := range ceilings {
		names = append(names, c.Policy)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// withinCeilings narrows a namespace policy's destinations and ports to every ceiling, and says
// what of the spec each ceiling left out, for the EgressEnforced condition.
func withinCeilings(spec *gatev1.EgressSpec, hosts map[string][]netip.Prefix, cidrs []netip.Prefix, ceilings []Ceiling, denied, cluster []netip.Prefix) (dests []netip.Prefix, ports []int32, outside []string) {
	var hostDests []netip.Prefix
	for _, ps := range hosts {
		hostDests = append(hostDests, ps...)
	}
	dests = canonical(slices.Concat(hostDests, cidrs))
	for _, c := range ceilings {
		dests = intersect(dests, c.destinations(denied, cluster))
	}
	ports = ceilingPorts(portsOf(spec), ceilings)
	covered := func(p netip.Prefix) bool {
		return slices.ContainsFunc(dests, func(d netip.Prefix) bool { return within(p, d) })
	}
	for _, host := range slices.Sorted(maps.Keys(hosts)) {
		for _, p := range hosts[host] {
			if !covered(p) {
				outside = append(outside, fmt.Sprintf("%s (%s)", host, p.Addr()))
			}
		}
	}
	for _, p := range cidrs {
		if covered(p) {
			continue
		}
		if inner := slices.DeleteFunc(slices.Clone(dests), func(d netip.Prefix) bool { return !within(d, p) }); len(inner) > 0 {
			outside = append(outside, fmt.Sprintf("%s (narrowed to %d prefixes inside it)", p, len(inner)))
		} else {
			outside = append(outside, p.String())
		}
	}
	for _, p := range portsOf(spec) {
		if !slices.Contains(ports, p) {
			outside = append(outside, fmt.Sprintf("port %d", p))
		}
	}
	return dests, ports, outside
}

// AllowsEgress reports whether a NetworkPolicy allows egress: it has egress rules, and its
// policyTypes are unset (then Egress is implied by them) or name Egress.
func AllowsEgress(np *networkingv1.NetworkPolicy) bool {
	if len(np.Spec.Egress) == 0 {
		return false
	}
	return len(np.Spec.PolicyTypes) == 0 || slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
}

// Beyond says what a NetworkPolicy's egress rules let its pods reach beyond the ceilings, one
// phrase per finding naming the rule (egress[i]); nil when every rule stays within all of them.
// A rule stays within when it names destinations (an empty to allows every one) and ports (an
// empty list allows every port), each port is a TCP port (or a TCP range) every ceiling allows,
// and each destination is an ipBlock inside the allowed CIDRs of every ceiling with every denied
// range (the ceilings' and the metadata ranges) in its except list. Pod and namespace peers are
// beyond a ceiling, but for the cluster DNS pods on port 53, which every allow-list sandbox may
// query. Hosts are not judged: a ceiling's allowedHosts open destinations to a namespace
// policy's NetworkPolicy, not to a tenant's.
func Beyond(rules []networkingv1.NetworkPolicyEgressRule, ceilings []Ceiling, dns DNSSelector) []string {
	if len(ceilings) == 0 {
		return nil
	}
	allowed := outermost(allowedPrefixes(ceilings[0].Spec))
	for _, c := range ceilings[1:] {
		allowed = intersect(allowed, allowedPrefixes(c.Spec))
	}
	denied := deniedWithin(&gatev1.EgressSpec{}, ceilings)
	ports := ceilingPorts(portsOf(ceilings[0].Spec), ceilings[1:])
	names := strings.Join(ceilingNames(ceilings), ", ")

	var out []string
	for i, r := range rules {
		at := fmt.Sprintf("egress[%d]", i)
		if len(r.To) == 0 {
			out = append(out, fmt.Sprintf("%s allows every destination; the ceiling of %s allows only %s", at, names, describePrefixes(allowed)))
		}
		dnsOnly := isDNSPorts(r.Ports)
		for j, peer := range r.To {
			pat := fmt.Sprintf("%s.to[%d]", at, j)
			if peer.IPBlock == nil {
				if dnsOnly && isDNSPeer(peer, dns) {
					continue
				}
				out = append(out, fmt.Sprintf("%s selects pods or namespaces, which are beyond the ceiling of %s (only the cluster DNS pods on port 53 are not)", pat, names))
				continue
			}
			out = append(out, ipBlockBeyond(pat, peer.IPBlock, allowed, denied, names)...)
		}
		if dnsOnly && allDNSPeers(r.To, dns) {
			continue
		}
		if len(r.Ports) == 0 {
			out = append(out, fmt.Sprintf("%s allows every port; the ceiling of %s allows TCP %s", at, names, describePorts(ports)))
		}
		for j, p := range r.Ports {
			if why := portBeyond(p, ports); why != "" {
				out = append(out, fmt.Sprintf("%s.ports[%d] %s; the ceiling of %s allows TCP %s", at, j, why, names, describePorts(ports)))
			}
		}
	}
	return out
}

func ipBlockBeyond(at string, b *networkingv1.IPBlock, allowed, denied []netip.Prefix, names string) []string {
	p, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return []string{fmt.Sprintf("%s.ipBlock.cidr %q is not a CIDR", at, b.CIDR)}
	}
	p = canonical([]netip.Prefix{p})[0]
	if !slices.ContainsFunc(allowed, func(a netip.Prefix) bool { return within(p, a) }) {
		return []string{fmt.Sprintf("%s.ipBlock.cidr %s is outside the ceiling of %s, which allows %s", at, p, names, describePrefixes(allowed))}
	}
	var except []netip.Prefix
	for _, e := range b.Except {
		if q, err := netip.ParsePrefix(e); err == nil {
			except = append(except, q)
		}
	}
	except = canonical(except)
	var out []string
	for _, d := range denied {
		switch {
		case within(p, d):
			out = append(out, fmt.Sprintf("%s.ipBlock.cidr %s lies in the denied range %s", at, p, d))
		case within(d, p) && !slices.ContainsFunc(except, func(e netip.Prefix) bool { return within(d, e) }):
			out = append(out, fmt.Sprintf("%s.ipBlock.cidr %s contains the denied range %s, which its except list must name", at, p, d))
		}
	}
	return out
}

// portBeyond says why a NetworkPolicy port goes beyond the ceiling's TCP ports, or "".
func portBeyond(p networkingv1.NetworkPolicyPort, allowed []int32) string {
	if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
		return "is " + string(*p.Protocol)
	}
	if p.Port == nil {
		return "allows every TCP port"
	}
	if p.Port.Type != intstr.Int {
		return fmt.Sprintf("names the port %q, which cannot be judged against a ceiling", p.Port.StrVal)
	}
	last := p.Port.IntVal
	if p.EndPort != nil {
		last = *p.EndPort
	}
	for n := p.Port.IntVal; n <= last; n++ {
		if !slices.Contains(allowed, n) {
			return fmt.Sprintf("allows TCP %d", n)
		}
	}
	return ""
}

// isDNSPorts reports whether the ports are port 53 only, over UDP or TCP.
func isDNSPorts(ports []networkingv1.NetworkPolicyPort) bool {
	if len(ports) == 0 {
		return false
	}
	for _, p := range ports {
		if p.Port == nil || p.Port.Type != intstr.Int || p.Port.IntVal != 53 || p.EndPort != nil && *p.EndPort != 53 ||
			p.Protocol != nil && *p.Protocol != corev1.ProtocolUDP && *p.Protocol != corev1.ProtocolTCP {
			return false
		}
	}
	return true
}

// isDNSPeer reports whether a peer selects exactly the cluster DNS pods.
func isDNSPeer(peer networkingv1.NetworkPolicyPeer, dns DNSSelector) bool {
	ns, pods := peer.NamespaceSelector, peer.PodSelector
	return ns != nil && pods != nil && len(ns.MatchExpressions) == 0 && len(pods.MatchExpressions) == 0 &&
		maps.Equal(ns.MatchLabels, map[string]string{corev1.LabelMetadataName: dns.Namespace}) &&
		len(pods.MatchLabels) > 0 && maps.Equal(pods.MatchLabels, dns.Labels)
}

func allDNSPeers(peers []networkingv1.NetworkPolicyPeer, dns DNSSelector) bool {
	return len(peers) > 0 && !slices.ContainsFunc(peers, func(p networkingv1.NetworkPolicyPeer) bool { return !isDNSPeer(p, dns) })
}

func describePrefixes(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "no CIDR"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

func describePorts(ports []int32) string {
	if len(ports) == 0 {
		return "no port"
	}
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ", ")
}
