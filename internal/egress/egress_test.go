package egress

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/golden"
)

// egressBlocks maps each ipBlock CIDR of a rendered egress to its except entries.
func egressBlocks(e Egress) map[string][]string {
	out := map[string][]string{}
	for _, rule := range e.Spec.Egress {
		for _, peer := range rule.To {
			if peer.IPBlock != nil && peer.IPBlock.CIDR != nil {
				out[*peer.IPBlock.CIDR] = peer.IPBlock.Except
			}
		}
	}
	return out
}

func blockList(e Egress) string {
	var cidrs []string
	for c := range egressBlocks(e) {
		cidrs = append(cidrs, c)
	}
	slices.Sort(cidrs)
	return strings.Join(cidrs, " ")
}

// TestCarveOutsUnderDefaultRoutes: allowing everything still leaves out every metadata and
// platform endpoint the clouds put next to a pod, under both families.
func TestCarveOutsUnderDefaultRoutes(t *testing.T) {
	spec := &gatev1.HarnessAgentPolicySpec{Egress: gatev1.EgressSpec{AllowedCIDRs: []gatev1.CIDR{"0.0.0.0/0", "::/0"}, Ports: []int32{443}}}
	blocks := egressBlocks(RenderEgress(spec, nil, DefaultDNSSelector, testCanary, nil, nil))
	want := map[string][]string{
		"0.0.0.0/0": {"100.100.100.200/32", "168.63.129.16/32", "169.254.0.0/16", "169.254.169.254/32"},
		"::/0":      {"fd00:ec2::23/128", "fd00:ec2::254/128", "fd20:ce::254/128", "fe80::/10"},
	}
	for cidr, required := range want {
		for _, r := range required {
			if !slices.Contains(blocks[cidr], r) {
				t.Errorf("%s does not carve out %s: except %v", cidr, r, blocks[cidr])
			}
		}
	}
	// Every entry of the list is carved out of the default route of its family.
	for _, m := range MetadataCIDRs {
		route := "0.0.0.0/0"
		if netip.MustParsePrefix(m).Addr().Is6() {
			route = "::/0"
		}
		if !slices.Contains(blocks[route], m) {
			t.Errorf("%s is in MetadataCIDRs but not carved out of %s", m, route)
		}
	}
}

// TestCarveOutsDocumented keeps docs/egress-carve-outs.md in step with the list the code
// enforces: every entry has a row, and the row names its source.
func TestCarveOutsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "egress-carve-outs.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range MetadataCIDRs {
		var row string
		for line := range strings.Lines(string(doc)) {
			if strings.HasPrefix(line, "| `"+m+"`") {
				row = line
			}
		}
		if row == "" {
			t.Errorf("docs/egress-carve-outs.md has no row for %s", m)
		} else if !strings.Contains(row, "https://") {
			t.Errorf("the row of %s names no source: %s", m, row)
		}
	}
}

// TestRenderEgressDropsInternalAnswers: DNS answers are attacker-influenced, so an allowed host
// that resolves to loopback, unspecified, link-local, multicast, broadcast, a denied range or
// the cluster's own ranges never becomes an allowed /32 or /128, and the host is named. An
// allowed CIDR still works, also for an address a name resolved to.
func TestRenderEgressDropsInternalAnswers(t *testing.T) {
	internal := []string{
		"127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1", "0.0.0.0", "0.1.2.3", "::",
		"169.254.170.23", "fe80::1", "224.0.0.251", "239.1.2.3", "ff02::fb", "255.255.255.255",
		"100.100.100.200", "168.63.129.16", "fd00:ec2::23", "fd20:ce::254", "64:ff9b::a9fe:a9fe",
		"10.96.0.10", "fd00:10:96::a", "64:ff9b::a60:a",
	}
	spec := &gatev1.HarnessAgentPolicySpec{Egress: gatev1.EgressSpec{
		AllowedHosts: []gatev1.Hostname{"rebind.example", "good.example", "pod.example"},
		AllowedCIDRs: []gatev1.CIDR{"10.244.0.0/16"},
		Ports:        []int32{443},
	}}
	hosts := map[string][]netip.Addr{
		"good.example": {netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("2001:db8::7"), netip.MustParseAddr("64:ff9b::c000:208")},
		"pod.example":  {netip.MustParseAddr("10.244.3.4")},
	}
	for _, a := range internal {
		hosts["rebind.example"] = append(hosts["rebind.example"], netip.MustParseAddr(a))
	}
	cluster, err := ParsePrefixes(" 10.96.0.0/12, 10.244.0.0/16,fd00:10:96::/112,")
	if err != nil {
		t.Fatal(err)
	}
	e := RenderEgress(spec, hosts, DefaultDNSSelector, testCanary, cluster, nil)
	if got := blockList(e); got != "10.244.0.0/16 10.244.3.4/32 192.0.2.7/32 2001:db8::7/128 64:ff9b::c000:208/128" {
		t.Fatalf("ipBlocks %s: want only the allowed CIDR and the public addresses", got)
	}
	if e.Addresses != 4 {
		t.Fatalf("Addresses %d, want 4", e.Addresses)
	}
	why := map[string]string{}
	for _, r := range e.Rejected {
		if r.Host != "rebind.example" {
			t.Errorf("%s rejected for %s (%s)", r.Host, r.Addr, r.Why)
		}
		why[r.Addr.String()] = r.Why
	}
	if len(e.Rejected) != len(internal)-1 { // ::ffff:127.0.0.1 is 127.0.0.1
		t.Errorf("rejected %d addresses, want %d: %v", len(e.Rejected), len(internal)-1, e.Rejected)
	}
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "0.1.2.3": "unspecified", "fe80::1": "link-local", "ff02::fb": "multicast",
		"255.255.255.255": "broadcast", "168.63.129.16": "in the denied range 168.63.129.16/32",
		"10.96.0.10": "in the cluster range 10.96.0.0/12", "fd00:10:96::a": "in the cluster range fd00:10:96::/112",
		"64:ff9b::a9fe:a9fe": "link-local, through NAT64", "64:ff9b::a60:a": "in the cluster range 10.96.0.0/12, through NAT64",
	} {
		if why[addr] != want {
			t.Errorf("%s rejected as %q, want %q", addr, why[addr], want)
		}
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes(DefaultClusterCIDRs)
	if err != nil || fmt.Sprint(got) != "[10.0.0.0/8 100.64.0.0/10 172.16.0.0/12 192.168.0.0/16 fc00::/7]" {
		t.Fatalf("defaults: %v %v", got, err)
	}
	if got, err := ParsePrefixes(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	if got, err := ParsePrefixes("10.1.2.3/8,::ffff:192.168.0.0/112"); err != nil || fmt.Sprint(got) != "[10.0.0.0/8 192.168.0.0/16]" {
		t.Fatalf("masking and unmapping: %v %v", got, err)
	}
	if _, err := ParsePrefixes("10.0.0.0/8,10.0.0.0"); err == nil {
		t.Fatal("an address without a prefix length was accepted")
	}
}

func TestRenderEgress(t *testing.T) {
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	selector := gatev1.HarnessAgentPolicySpec{}.PodSelector
	selector.MatchLabels = map[string]string{"gate.intutic.io/policy": "coding-agents"}
	cases := []struct {
		name    string
		egress  gatev1.EgressSpec
		addrs   []netip.Addr
		dropped []string
	}{
		{"deny-all", gatev1.EgressSpec{Ports: []int32{443}}, nil, nil},
		{"hosts", gatev1.EgressSpec{AllowedHosts: []gatev1.Hostname{"github.com", "api.anthropic.com"}, Ports: []int32{443, 22}},
			addrs("140.82.112.3", "160.79.104.10", "2607:6bc0::10", "140.82.112.3", "::ffff:140.82.112.4"), nil},
		{"metadata and denied ranges carved out", gatev1.EgressSpec{
			AllowedHosts: []gatev1.Hostname{"metadata.internal"},
			AllowedCIDRs: []gatev1.CIDR{"169.254.0.0/15", "10.0.0.0/8", "169.254.169.0/24", "fd00::/8", "10.1.2.3/8"},
			DeniedCIDRs:  []gatev1.CIDR{"10.96.0.0/12", "10.96.0.0/12"},
			Ports:        []int32{443}},
			addrs("169.254.169.254", "10.100.0.1", "10.2.3.4"), []string{"169.254.169.254", "10.100.0.1", "169.254.169.0/24"}},
		{"hosts that resolved to nothing allow only DNS", gatev1.EgressSpec{AllowedHosts: []gatev1.Hostname{"nowhere.invalid"}, Ports: []int32{443}}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := &gatev1.HarnessAgentPolicySpec{PodSelector: selector, Egress: tc.egress}
			hosts := map[string][]netip.Addr{"allowed.example": tc.addrs}
			e := RenderEgress(spec, hosts, DefaultDNSSelector, testCanary, nil, nil)
			got, err := yaml.Marshal(e.Spec)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("egress", strings.ReplaceAll(tc.name, " ", "-")+".yaml"), got)
			if strings.Join(e.Dropped, ",") != strings.Join(tc.dropped, ",") {
				t.Errorf("dropped %v, want %v", e.Dropped, tc.dropped)
			}
			again, _ := yaml.Marshal(RenderEgress(spec, map[string][]netip.Addr{"allowed.example": append([]netip.Addr{}, tc.addrs...)}, DefaultDNSSelector, testCanary, nil, nil).Spec)
			if !bytes.Equal(got, again) {
				t.Error("rendering is not stable")
			}
		})
	}
}
