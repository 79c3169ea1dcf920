package egress

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/confirmerconfig"
)

// Canary is the manager's egress canary control port (internal/egresscanary), which every
// rendered egress policy allows, deny-all included: egress-wait counts a block of the denied
// canary port only while this port answers through the same policy. The denied port is in no
// rule. A zero Canary renders no rule (and egress-wait then never starts a pod: fail closed).
type Canary struct {
	// Namespace is the manager's namespace; Labels its pods' labels.
	Namespace string
	Labels    map[string]string
	// Port is the control port on the manager's pods (a NetworkPolicy names the pod's port,
	// not the Service's).
	Port int32
}

func (c Canary) enabled() bool { return c.Port != 0 && c.Namespace != "" && len(c.Labels) > 0 }

// rule is the egress rule that allows the control port.
func (c Canary) rule() *networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration {
	return networkingv1ac.NetworkPolicyEgressRule().
		WithTo(networkingv1ac.NetworkPolicyPeer().
			WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{corev1.LabelMetadataName: c.Namespace})).
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(c.Labels))).
		WithPorts(port(corev1.ProtocolTCP, c.Port))
}

// IsRule reports whether r is exactly the rule RenderEgress adds for c: one peer, the
// manager's pods in its namespace, and one port, TCP c.Port.
func (c Canary) IsRule(r networkingv1.NetworkPolicyEgressRule) bool {
	if !c.enabled() || len(r.To) != 1 || len(r.Ports) != 1 {
		return false
	}
	peer, p := r.To[0], r.Ports[0]
	if peer.IPBlock != nil || peer.NamespaceSelector == nil || peer.PodSelector == nil ||
		len(peer.NamespaceSelector.MatchExpressions) > 0 || len(peer.PodSelector.MatchExpressions) > 0 ||
		!maps.Equal(peer.NamespaceSelector.MatchLabels, map[string]string{corev1.LabelMetadataName: c.Namespace}) ||
		!maps.Equal(peer.PodSelector.MatchLabels, c.Labels) {
		return false
	}
	return p.Protocol != nil && *p.Protocol == corev1.ProtocolTCP && p.EndPort == nil &&
		p.Port != nil && p.Port.IntValue() == int(c.Port)
}

// ModeOf is the egress mode of a policy's rules as stored: deny-all when every rule is the
// canary rule of c or a human lane's (HumanLaneRule).
func ModeOf(rules []networkingv1.NetworkPolicyEgressRule, c Canary) gatev1.EgressMode {
	for _, r := range rules {
		if !c.IsRule(r) && !isHumanLaneRule(r) {
			return gatev1.EgressModeAllowList
		}
	}
	return gatev1.EgressModeDenyAll
}

// HumanLaneRule is the egress a policy's pods get for the human lane of their gate-agent
// (spec.gateAgent.humanApproval): the named SessionConfirmer's pods, in the policy's namespace,
// on its gate API port. The NetworkPolicy applies to the whole pod, so the agent can reach that
// port too; the confirmer serves it nothing without the token only gate-agent mounts.
func HumanLaneRule(confirmer string) *networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration {
	return networkingv1ac.NetworkPolicyEgressRule().
		WithTo(networkingv1ac.NetworkPolicyPeer().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(confirmerconfig.PodSelector(confirmer)))).
		WithPorts(port(corev1.ProtocolTCP, confirmerconfig.ServicePort))
}

// isHumanLaneRule reports whether r is a HumanLaneRule: one peer, a confirmer's pods of the
// policy's namespace, and one TCP port.
func isHumanLaneRule(r networkingv1.NetworkPolicyEgressRule) bool {
	if len(r.To) != 1 || len(r.Ports) != 1 {
		return false
	}
	peer := r.To[0]
	return peer.IPBlock == nil && peer.NamespaceSelector == nil && peer.PodSelector != nil && len(peer.PodSelector.MatchExpressions) == 0 &&
		peer.PodSelector.MatchLabels[gatev1.LabelConfirmer] != "" &&
		maps.Equal(peer.PodSelector.MatchLabels, confirmerconfig.PodSelector(peer.PodSelector.MatchLabels[gatev1.LabelConfirmer]))
}
