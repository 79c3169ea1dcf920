package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
)

// PolicyNamespace is the namespace of the HarnessAgentPolicy the SessionConfirmer names:
// spec.policyRef.namespace, or its own when that is empty.
func (sc *SessionConfirmer) PolicyNamespace() string {
	if ns := sc.Spec.PolicyRef.Namespace; ns != "" {
		return ns
	}
	return sc.Namespace
}

// CrossNamespace reports whether the SessionConfirmer names a policy of another namespace.
func (sc *SessionConfirmer) CrossNamespace() bool { return sc.PolicyNamespace() != sc.Namespace }

// PolicyDisplayName is the policy as status and messages show it: its name, or
// namespace/name when it is in another namespace.
func (sc *SessionConfirmer) PolicyDisplayName() string {
	if sc.CrossNamespace() {
		return sc.PolicyNamespace() + "/" + sc.Spec.PolicyRef.Name
	}
	return sc.Spec.PolicyRef.Name
}

// ForbiddenPolicyNamespace says why the SessionConfirmer may not name its policy's namespace,
// or "" when it may: another namespace only from one of platform, the manager's platform
// namespaces. The webhook refuses with it at kubectl apply and the controller reports it, since
// the webhook is failurePolicy Ignore.
func (sc *SessionConfirmer) ForbiddenPolicyNamespace(platform []string) string {
	if !sc.CrossNamespace() || slices.Contains(platform, sc.Namespace) {
		return ""
	}
	listed := "the manager has none"
	if len(platform) > 0 {
		listed = "the manager's are " + strings.Join(platform, ", ")
	}
	return fmt.Sprintf("spec.policyRef.namespace: a SessionConfirmer in namespace %s may not name a HarnessAgentPolicy of namespace %s: "+
		"only SessionConfirmers in a platform namespace may (--platform-namespaces, the chart's manager.platformNamespaces; %s); "+
		"leave spec.policyRef.namespace empty to name a policy of %s", sc.Namespace, sc.PolicyNamespace(), listed, sc.Namespace)
}
