// Package webhook is the manager's admission webhooks and their certificates:
//   - HarnessAgentPolicy create/update is validated with the controller's own recipe
//     (bootstrap.Build, the gate's CEL environment): a rule that does not compile is refused
//     with its field path, and what is legal but probably wrong comes back as warnings;
//   - SessionConfirmer create/update draws a warning when its policyRef names no policy;
//   - a ToolApproval's decision (a toolapprovals/status update) gets its decider's identity and
//     time from the request (ApprovalRecorder), and is refused unless its requester may make it
//     (ApprovalValidator: the verb approve on the policy, before the deadline, never twice);
//   - a pod created with the label gate.intutic.io/policy: <name> gets what
//     docs/examples/sandbox-pod.yaml writes by hand (Inject, pure), or is refused when the
//     policy does not exist;
//   - a NetworkPolicy with egress rules is refused when it would let pods under a
//     ClusterHarnessAgentPolicy's egress ceiling reach beyond it (NetworkPolicyValidator).
//
// The serving certificate is self-managed (cert-controller keeps a CA and a certificate in a
// Secret and the CA in the configurations) or issued by someone else (cert-manager); the
// server starts on every replica once its certificate is there.
package webhook

// The pod and SessionConfirmer webhooks read the policy they name from the API server; the
// GateException webhook reads the policy an exception names and its namespace's labels.
// +kubebuilder:rbac:groups=gate.intutic.io,resources=harnessagentpolicies,verbs=get
// +kubebuilder:rbac:groups=gate.intutic.io,resources=clusterharnessagentpolicies,verbs=get
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// The NetworkPolicy webhook lists the cluster policies, reads the NetworkPolicy's namespace's
// labels, and lists its pods' metadata to learn whether a ceiling governs a pod it selects.
// +kubebuilder:rbac:groups=gate.intutic.io,resources=clusterharnessagentpolicies,verbs=list
// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// The ToolApproval decision webhook asks the API server who may approve a policy; the review is
// namespaced (LocalSubjectAccessReview), so a RoleBinding per served namespace grants it.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=localsubjectaccessreviews,verbs=create
