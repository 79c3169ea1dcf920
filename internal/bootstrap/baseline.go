package bootstrap

import (
	"net/netip"
	"slices"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/egress"
	"github.com/intutic/gate-operator/internal/gate"
)

// RenderBaseline renders a namespace's baseline bundle (BaselineConfigMap), which the pods that
// no namespace policy governs mount: the cluster layers selecting the namespace decide their
// calls alone. It has the keys of a layered namespace policy's bundle, with a layers index that
// says the bundle has no namespace policy (Namespaced false), so the hook never reads
// policy-snapshot.rules, which is there and empty. The layers are built for workspace ""
// (ClusterLayerOf), and so is the bundle; layers.Exceptions (a namespace policy's own) are
// ignored, each layer's exceptions are its own. A pod that no layer selects is refused
// (no_policy).
//
// The harness settings are the layers' posture floor over a namespace policy's defaults
// (allow-edits, bash filtered); the harness network policy allows what every egress ceiling
// allows (BaselineHarnessEgress): with none, it denies all. A *TooLargeError says the layers do
// not fit in one ConfigMap.
func RenderBaseline(layers Layers, namespace string, ceilings []*gatev1.EgressSpec, opts Options) (Bundle, error) {
	spec := &gatev1.HarnessAgentPolicySpec{PermissionMode: gatev1.PermissionModeAllowEdits, FilterBash: new(true)}
	if e := BaselineHarnessEgress(ceilings); e != nil {
		spec.Egress = *e
	}
	harness, err := renderHarness(applyFloor(spec, layers.Cluster))
	if err != nil {
		return Bundle{}, err
	}
	return render(nil, nil, harness, "", Layers{Cluster: layers.Cluster}, namespace, false, opts)
}

// RenderBaselineBlocking renders the baseline bundle of a namespace whose layers do not fit in
// one ConfigMap (RenderBaseline's *TooLargeError, which reason says): a snapshot that blocks
// every call (policy_invalid) with the most restrictive harness settings. A namespace never
// runs without its baseline.
func RenderBaselineBlocking(namespace, reason string, opts Options) (Bundle, error) {
	invalid, err := gate.BuildInvalidSnapshot(gate.PolicyMeta{Policy: namespace + "/" + baselineName}, reason)
	if err != nil {
		return Bundle{}, err
	}
	data, err := invalid.Encode()
	if err != nil {
		return Bundle{}, err
	}
	return RenderBlocking("", data, opts)
}

// baselineName names the baseline in the snapshot of RenderBaselineBlocking: a name no namespace
// policy can have (BaselineConfigMap).
const baselineName = "gate-baseline"

// BaselineHarnessEgress is the egress a baseline's harness network policy allows: what every
// ceiling allows, as far as a HarnessV1NetworkPolicy can say it. A host is allowed when every
// ceiling lists it, a CIDR where every ceiling's CIDRs cover it (the narrower of two nesting
// prefixes), and every ceiling's denied CIDRs are denied. No ceiling, or one that allows
// nothing, is nil: deny all. The NetworkPolicy (egress.RenderEgress) is what the packets meet;
// this is never wider than it.
func BaselineHarnessEgress(ceilings []*gatev1.EgressSpec) *gatev1.EgressSpec {
	if len(ceilings) == 0 || slices.ContainsFunc(ceilings, egress.IsDenyAll) {
		return nil
	}
	out := &gatev1.EgressSpec{}
	for _, h := range ceilings[0].AllowedHosts {
		if !slices.Contains(out.AllowedHosts, h) && !slices.ContainsFunc(ceilings[1:], func(c *gatev1.EgressSpec) bool { return !slices.Contains(c.AllowedHosts, h) }) {
			out.AllowedHosts = append(out.AllowedHosts, h)
		}
	}
	var cidrs []netip.Prefix
	for _, c := range ceilings {
		for _, p := range prefixes(c.AllowedCIDRs) {
			if !slices.Contains(cidrs, p) && !slices.ContainsFunc(ceilings, func(o *gatev1.EgressSpec) bool { return !covered(p, prefixes(o.AllowedCIDRs)) }) {
				cidrs = append(cidrs, p)
			}
		}
	}
	for _, p := range cidrs {
		out.AllowedCIDRs = append(out.AllowedCIDRs, gatev1.CIDR(p.String()))
	}
	for _, c := range ceilings {
		for _, d := range c.DeniedCIDRs {
			if !slices.Contains(out.DeniedCIDRs, d) {
				out.DeniedCIDRs = append(out.DeniedCIDRs, d)
			}
		}
	}
	if egress.IsDenyAll(out) {
		return nil
	}
	return out
}

// prefixes are the CIDRs that parse, masked; the schema refuses the others.
func prefixes(cidrs []gatev1.CIDR) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(string(c)); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// covered reports whether one of ps contains p.
func covered(p netip.Prefix, ps []netip.Prefix) bool {
	return slices.ContainsFunc(ps, func(q netip.Prefix) bool {
		return q.Addr().Is4() == p.Addr().Is4() && q.Bits() <= p.Bits() && q.Contains(p.Addr())
	})
}
