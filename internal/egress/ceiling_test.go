package egress

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// renderedPorts are the TCP ports of the rendered destination rule (the one with ipBlocks).
func renderedPorts(e Egress) []int32 {
	for _, rule := range e.Spec.Egress {
		if len(rule.To) == 0 || rule.To[0].IPBlock == nil {
			continue
		}
		var out []int32
		for _, p := range rule.Ports {
			out = append(out, p.Port.IntVal)
		}
		return out
	}
	return nil
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// TestCeilingNarrowsANamespacePolicy: a namespace policy's destinations and ports are cut to
// what the ceiling allows, and what was cut is named.
func TestCeilingNarrowsANamespacePolicy(t *testing.T) {
	spec := &gatev1.HarnessAgentPolicySpec{Egress: gatev1.EgressSpec{
		AllowedHosts: []gatev1.Hostname{"api.example", "paste.example"},
		AllowedCIDRs: []gatev1.CIDR{"198.51.100.10/32", "10.0.0.0/8"},
		Ports:        []int32{443, 8443},
	}}
	hosts := map[string][]netip.Addr{"api.example": addrs("203.0.113.10"), "paste.example": addrs("203.0.113.20")}
	ceiling := Ceiling{Policy: "baseline", Spec: &gatev1.EgressSpec{
		AllowedHosts: []gatev1.Hostname{"api.example"},
		AllowedCIDRs: []gatev1.CIDR{"198.51.100.0/24", "10.1.0.0/16"},
		DeniedCIDRs:  []gatev1.CIDR{"10.1.2.0/24"},
		Ports:        []int32{443},
	}, HostAddrs: map[string][]netip.Addr{"api.example": addrs("203.0.113.10")}}

	e := RenderEgress(spec, hosts, DefaultDNSSelector, testCanary, nil, []Ceiling{ceiling})
	if e.Mode != gatev1.EgressModeAllowList {
		t.Fatalf("mode %s, want AllowList", e.Mode)
	}
	if got, want := blockList(e), "10.1.0.0/16 198.51.100.10/32 203.0.113.10/32"; got != want {
		t.Errorf("destinations %q, want %q", got, want)
	}
	if got := egressBlocks(e)["10.1.0.0/16"]; !slices.Contains(got, "10.1.2.0/24") {
		t.Errorf("the ceiling's denied range is not carved out of 10.1.0.0/16: except %v", got)
	}
	if got := renderedPorts(e); !slices.Equal(got, []int32{443}) {
		t.Errorf("ports %v, want [443]", got)
	}
	if e.Addresses != 1 {
		t.Errorf("addresses %d, want 1 (paste.example is outside the ceiling)", e.Addresses)
	}
	wantOutside := []string{"paste.example (203.0.113.20)", "10.0.0.0/8 (narrowed to 1 prefixes inside it)", "port 8443"}
	if !slices.Equal(e.OutsideCeiling, wantOutside) {
		t.Errorf("outside the ceiling %q, want %q", e.OutsideCeiling, wantOutside)
	}
	if !slices.Equal(e.Ceilings, []string{"baseline"}) {
		t.Errorf("ceilings %v", e.Ceilings)
	}
}

// TestCeilingThatAllowsNothingDeniesAll: a ceiling with no destinations leaves a namespace
// policy's pods no egress at all, DNS included.
func TestCeilingThatAllowsNothingDeniesAll(t *testing.T) {
	spec := &gatev1.HarnessAgentPolicySpec{Egress: gatev1.EgressSpec{AllowedCIDRs: []gatev1.CIDR{"0.0.0.0/0"}}}
	e := RenderEgress(spec, nil, DefaultDNSSelector, testCanary, nil, []Ceiling{{Policy: "lockdown", Spec: &gatev1.EgressSpec{}}})
	if e.Mode != gatev1.EgressModeDenyAll || len(e.Spec.Egress) != 1 {
		t.Fatalf("mode %s with %d rules; want DenyAll with only the canary's rule", e.Mode, len(e.Spec.Egress))
	}
	if len(e.OutsideCeiling) != 1 {
		t.Errorf("outside the ceiling: %q", e.OutsideCeiling)
	}
}

// TestCeilingsIntersect: under two ceilings only what both allow is left; disjoint ceilings
// leave DNS and no destination rule (a rule without destinations would allow all).
func TestCeilingsIntersect(t *testing.T) {
	spec := &gatev1.HarnessAgentPolicySpec{Egress: gatev1.EgressSpec{AllowedCIDRs: []gatev1.CIDR{"0.0.0.0/0"}, Ports: []int32{443, 8443}}}
	a := Ceiling{Policy: "a", Spec: &gatev1.EgressSpec{AllowedCIDRs: []gatev1.CIDR{"198.51.100.0/24"}, Ports: []int32{443, 8443}}}
	b := Ceiling{Policy: "b", Spec: &gatev1.EgressSpec{AllowedCIDRs: []gatev1.CIDR{"198.51.100.128/25", "192.0.2.0/24"}, Ports: []int32{443}}}
	e := RenderEgress(spec, nil, DefaultDNSSelector, testCanary, nil, []Ceiling{a, b})
	if got := blockList(e); got != "198.51.100.128/25" {
		t.Errorf("destinations %q, want 198.51.100.128/25", got)
	}
	if got := renderedPorts(e); !slices.Equal(got, []int32{443}) {
		t.Errorf("ports %v, want [443]", got)
	}
	c := Ceiling{Policy: "c", Spec: &gatev1.EgressSpec{AllowedCIDRs: []gatev1.CIDR{"192.0.2.0/24"}}}
	e = RenderEgress(spec, nil, DefaultDNSSelector, testCanary, nil, []Ceiling{a, c})
	if e.Mode != gatev1.EgressModeAllowList || blockList(e) != "" {
		t.Errorf("disjoint ceilings: mode %s, destinations %q; want AllowList with none", e.Mode, blockList(e))
	}
}

// TestCeilingNeverWidens is the property the ceiling exists for, on random policies and
// ceilings: every destination and port rendered lies inside both the namespace policy's and
// every ceiling's, and every address both allow stays reachable.
func TestCeilingNeverWidens(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 4))
	universe := []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.3/32", "10.2.0.0/16", "192.0.2.0/24", "192.0.2.128/25", "192.0.2.7/32", "0.0.0.0/0", "198.51.100.0/24"}
	pick := func() []gatev1.CIDR {
		var out []gatev1.CIDR
		for _, c := range universe {
			if rng.IntN(4) == 0 {
				out = append(out, gatev1.CIDR(c))
			}
		}
		return out
	}
	pickPorts := func() []int32 {
		var out []int32
		for _, p := range []int32{443, 8443, 80} {
			if rng.IntN(2) == 0 {
				out = append(out, p)
			}
		}
		return out
	}
	probes := addrs("10.1.2.3", "10.1.9.9", "10.2.0.1", "10.9.9.9", "192.0.2.7", "192.0.2.200", "198.51.100.1", "203.0.113.1")
	allows := func(cidrs []gatev1.CIDR, a netip.Addr) bool {
		return slices.ContainsFunc(cidrs, func(c gatev1.CIDR) bool { return netip.MustParsePrefix(string(c)).Contains(a) })
	}
	for i := range 2000 {
		spec := &gatev1.HarnessAgentPolicySpec{Egress: gatev1.EgressSpec{AllowedCIDRs: pick(), Ports: pickPorts()}}
		var ceilings []Ceiling
		for j := range rng.IntN(3) {
			ceilings = append(ceilings, Ceiling{Policy: string(rune('a' + j)), Spec: &gatev1.EgressSpec{AllowedCIDRs: pick(), Ports: pickPorts()}})
		}
		e := RenderEgress(spec, nil, DefaultDNSSelector, testCanary, nil, ceilings)
		reach := func(a netip.Addr) bool {
			for cidr, except := range egressBlocks(e) {
				if netip.MustParsePrefix(cidr).Contains(a) && !slices.ContainsFunc(except, func(x string) bool { return netip.MustParsePrefix(x).Contains(a) }) {
					return true
				}
			}
			return false
		}
		ports := portsOf(&spec.Egress)
		for _, c := range ceilings {
			ports = slices.DeleteFunc(ports, func(p int32) bool { return !slices.Contains(portsOf(c.Spec), p) })
		}
		for _, a := range probes {
			want := allows(spec.Egress.AllowedCIDRs, a) && len(ports) > 0
			for _, c := range ceilings {
				want = want && allows(c.Spec.AllowedCIDRs, a)
			}
			if len(spec.Egress.AllowedCIDRs) == 0 {
				want = false // deny all
			}
			if reach(a) != want {
				t.Fatalf("case %d: %s reachable %t, want %t\npolicy %v\nceilings %+v\nrendered %s", i, a, reach(a), want, spec.Egress.AllowedCIDRs, ceilings, blockList(e))
			}
		}
		if got := renderedPorts(e); len(egressBlocks(e)) > 0 && !slices.Equal(got, ports) {
			t.Fatalf("case %d: ports %v rendered, want the ports the policy and every ceiling allow, %v", i, got, ports)
		}
	}
}
