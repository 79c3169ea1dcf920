package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExceptionPolicyKind is the kind of policy a GateException lifts rules of.
// +kubebuilder:validation:Enum=ClusterHarnessAgentPolicy;HarnessAgentPolicy
type ExceptionPolicyKind string

const (
	// ExceptionOfClusterPolicy names a ClusterHarnessAgentPolicy.
	ExceptionOfClusterPolicy ExceptionPolicyKind = "ClusterHarnessAgentPolicy"
	// ExceptionOfNamespacePolicy names a HarnessAgentPolicy of the exception's namespace.
	ExceptionOfNamespacePolicy ExceptionPolicyKind = "HarnessAgentPolicy"
)

// ExceptionPolicyRef names the policy whose rules an exception lifts.
type ExceptionPolicyRef struct {
	// kind is ClusterHarnessAgentPolicy or HarnessAgentPolicy (of the exception's namespace).
	// +required
	Kind ExceptionPolicyKind `json:"kind"`

	// name is the policy's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RuleName is the name of a rule of a policy: a DNS label.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be a rule name: a DNS label"
type RuleName string

// GateExceptionSpec lifts named rules of one policy for selected pods and tools, until expiresAt.
type GateExceptionSpec struct {
	// policyRef is the policy whose rules are lifted. The policy must allow exceptions in this namespace (spec.exceptions), and the requester must be allowed the verb exempt on it.
	// +required
	PolicyRef ExceptionPolicyRef `json:"policyRef"`

	// rules are the names of the policy's rules that do not apply to the selected calls while the exception is active. Its other rules, and every other policy's, still do.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Rules []RuleName `json:"rules"`

	// tools are glob patterns on the tool name, as rules' tools are; empty lifts the rules for every tool.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Tools []string `json:"tools,omitempty"`

	// podSelector selects the pods of this namespace the exception applies to, by their labels; empty is every pod. An exception with a pod selector never applies on the surfaces without a pod (the Managed Agents confirmer, the gate HTTP API).
	// +optional
	PodSelector metav1.LabelSelector `json:"podSelector,omitempty"`

	// expiresAt is when the exception stops applying. The gate itself stops honouring it at this time, by its own clock, whether or not the manager runs. It must be in the future, and no further from the request than the policy's exceptions.maxDuration.
	// +required
	ExpiresAt metav1.Time `json:"expiresAt"`

	// reason says why the rules are lifted: it is recorded with every decision the exception changes.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`

	// ticket is an optional reference to the change or incident that approved the exception.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Ticket string `json:"ticket,omitempty"`
}

// ExceptionPhase is the state of a GateException.
type ExceptionPhase string

const (
	// ExceptionActive means the exception is in the bundles of its namespace and lifts its rules.
	ExceptionActive ExceptionPhase = "Active"
	// ExceptionExpired means expiresAt has passed: the gate no longer honours it. The object stays
	// (GitOps owns its spec) until it is deleted.
	ExceptionExpired ExceptionPhase = "Expired"
	// ExceptionRefused means the exception is not honoured (the message says why: the policy does
	// not exist, does not allow exceptions here or for this long, or has no such rule).
	ExceptionRefused ExceptionPhase = "Refused"
)

// GateExceptionStatus is the observed state of a GateException.
type GateExceptionStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is Active, Expired or Refused.
	// +optional
	Phase ExceptionPhase `json:"phase,omitempty"`

	// message says why the exception is in its phase.
	// +optional
	Message string `json:"message,omitempty"`

	// requestedBy is the user whose request created or last changed the exception's spec, as the API server authenticated them (the manager's admission webhook records it in the annotation gate.intutic.io/requested-by).
	// +optional
	RequestedBy string `json:"requestedBy,omitempty"`
}

// GateException lifts named rules of one policy for selected pods and tools until it expires: an exception that expires by itself, honoured by the gate's own clock.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gex,categories=gate
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Policy-Kind",type=string,JSONPath=`.spec.policyRef.kind`,priority=1
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policyRef.name`
// +kubebuilder:printcolumn:name="Rules",type=string,JSONPath=`.spec.rules`
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="Requested-By",type=string,JSONPath=`.status.requestedBy`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GateException struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the exception.
	// +required
	Spec GateExceptionSpec `json:"spec"`

	// status is written by the controller.
	// +optional
	Status GateExceptionStatus `json:"status,omitempty"`
}

// GateExceptionList is a list of GateException.
//
// +kubebuilder:object:root=true
type GateExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GateException `json:"items"`
}

// ClusterExceptionPolicy says where a cluster policy's rules may be excepted, and for how long.
type ClusterExceptionPolicy struct {
	// namespaceSelector selects the namespaces whose GateExceptions may lift this policy's rules (for that namespace's pods only).
	// +required
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`

	// maxDuration is the longest an exception may run, from the request that creates or changes it to its expiresAt.
	// +required
	MaxDuration metav1.Duration `json:"maxDuration"`
}

// NamespaceExceptionPolicy says for how long a namespace policy's rules may be excepted, by
// GateExceptions of its own namespace.
type NamespaceExceptionPolicy struct {
	// maxDuration is the longest an exception may run, from the request that creates or changes it to its expiresAt.
	// +required
	MaxDuration metav1.Duration `json:"maxDuration"`
}

// ExemptVerb is the custom verb on clusterharnessagentpolicies and harnessagentpolicies
// (resource name = the policy) that a user needs, in the exception's namespace, to create or
// change a GateException of that policy: a RoleBinding there to a Role granting it (or a
// ClusterRoleBinding, for every namespace).
const ExemptVerb = "exempt"

// Annotations the exception admission webhook writes.
const (
	// AnnotationRequestedBy is the user whose request last wrote the exception's spec.
	AnnotationRequestedBy = "gate.intutic.io/requested-by"
	// AnnotationRequestedAt is when, RFC 3339: maxDuration runs from it.
	AnnotationRequestedAt = "gate.intutic.io/requested-at"
)
