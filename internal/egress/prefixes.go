package egress

import (
	"net/netip"
	"slices"
	"strings"
)

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
