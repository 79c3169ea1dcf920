package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyReference names a HarnessAgentPolicy: in the same namespace, or in another one when the
// SessionConfirmer is in one of the manager's platform namespaces.
type PolicyReference struct {
	// name of the HarnessAgentPolicy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// namespace of the HarnessAgentPolicy; empty is the SessionConfirmer's own. Another namespace is allowed only when the SessionConfirmer's namespace is one of the manager's platform namespaces (--platform-namespaces, the chart's manager.platformNamespaces): then its key, Lease and ToolApprovals stay in that namespace, out of reach of those who may edit the policy's (docs/confirmer.md).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be a namespace name, such as agents"
	Namespace string `json:"namespace,omitempty"`
}

// SecretKeyReference selects one key of a Secret in the same namespace.
type SecretKeyReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key within the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// AnthropicSpec says how the confirmer reaches the Managed Agents Sessions API.
type AnthropicSpec struct {
	// baseURL of the Anthropic API.
	// +optional
	// +kubebuilder:default="https://api.anthropic.com"
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (url(self).getScheme() == 'https' || url(self).getScheme() == 'http')",message="must be an http or https URL such as https://api.anthropic.com"
	BaseURL string `json:"baseURL,omitempty"`

	// apiKeySecretRef selects the Secret key holding the API key. It is mounted as a file, never passed in the environment.
	// +required
	APIKeySecretRef SecretKeyReference `json:"apiKeySecretRef"`

	// workspaceID, when set, is sent as the anthropic-workspace-id header.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	WorkspaceID string `json:"workspaceID,omitempty"`
}

// SessionsSpec says which Managed Agents sessions the confirmer watches.
type SessionsSpec struct {
	// agentIDs are the agents whose sessions are discovered and answered.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	AgentIDs []string `json:"agentIDs,omitempty"`

	// pollInterval is how often sessions are listed again, between 1s and 1h.
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="must be a duration between 1s and 1h, such as 10s"
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`
}

// WebhookSpec configures the receiver of Managed Agents webhooks.
type WebhookSpec struct {
	// signingKeySecretRef selects the Secret key holding the Standard Webhooks signing key (whsec_...). It is mounted as a file.
	// +required
	SigningKeySecretRef SecretKeyReference `json:"signingKeySecretRef"`
}

// HumanApprovalSpec configures how calls sent to a human (Ask) are held.
type HumanApprovalSpec struct {
	// deadline is how long an Ask verdict waits for a human before the call is denied, between 10s and 24h.
	// +optional
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('24h')",message="must be a duration between 10s and 24h, such as 15m"
	Deadline *metav1.Duration `json:"deadline,omitempty"`

	// showInput puts a preview of the call's input (its first 1024 bytes, UTF-8) in each ToolApproval's spec.input.preview, for the approver to read. Off by default: tool inputs can carry secrets, and a ToolApproval is readable by everyone who may list them. Without it the approver sees the tool, rule, reason, and the input's size and SHA-256.
	// +optional
	ShowInput bool `json:"showInput,omitempty"`
}

// ServiceAccountName is a Kubernetes ServiceAccount written namespace/name.
// +kubebuilder:validation:MaxLength=317
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$')",message="must be a ServiceAccount written namespace/name, such as agents/orchestrator"
type ServiceAccountName string

// GateAPISpec configures the gate HTTP API the confirmer serves to harness and workflow code.
type GateAPISpec struct {
	// allowedServiceAccounts may call the gate HTTP API, authenticated by their tokens.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	AllowedServiceAccounts []ServiceAccountName `json:"allowedServiceAccounts,omitempty"`
}

// SessionConfirmerSpec declares a confirmer for one set of Managed Agents sessions and one policy.
type SessionConfirmerSpec struct {
	// policyRef names the HarnessAgentPolicy whose rules answer the calls: in this namespace, or in policyRef.namespace from a platform namespace.
	// +required
	PolicyRef PolicyReference `json:"policyRef"`

	// anthropic says how to reach the Sessions API.
	// +required
	Anthropic AnthropicSpec `json:"anthropic"`

	// sessions says which sessions to watch.
	// +optional
	// +kubebuilder:default={}
	Sessions SessionsSpec `json:"sessions,omitempty"`

	// webhook, when set, receives session.requires_action webhooks, verified with the signing key.
	// +optional
	Webhook *WebhookSpec `json:"webhook,omitempty"`

	// humanApproval configures how Ask verdicts wait for a human.
	// +optional
	// +kubebuilder:default={}
	HumanApproval HumanApprovalSpec `json:"humanApproval,omitempty"`

	// gateAPI configures the gate HTTP API.
	// +optional
	GateAPI GateAPISpec `json:"gateAPI,omitempty"`

	// image overrides the confirmer image the operator was installed with.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// replicas of the confirmer Deployment: capacity, not only standby. With more than one, the replicas share the sessions (each watches about 1/replicas of them, by rendezvous hashing over the live members recorded on the Lease <name>-confirmer) and take over a lost replica's sessions within about 20 s; every call is still confirmed once. A PodDisruptionBudget is created when above 1.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Replicas *int32 `json:"replicas,omitempty"`

	// resources of the confirmer container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// SessionConfirmerStatus is the observed state of a SessionConfirmer.
type SessionConfirmerStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: PolicyResolved, Available, and Ready derived from them.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// readyReplicas of the confirmer Deployment.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// serviceURL is the in-cluster URL of the gate HTTP API.
	// +optional
	ServiceURL string `json:"serviceURL,omitempty"`

	// policy is the HarnessAgentPolicy answering the calls: its name, or namespace/name when it is in another namespace.
	// +optional
	Policy string `json:"policy,omitempty"`

	// snapshotDigest is the digest of the rules snapshot the confirmer is given (sha256:<hex>).
	// +optional
	SnapshotDigest string `json:"snapshotDigest,omitempty"`
}

// SessionConfirmer runs a confirmer Deployment that answers the tool-confirmation pauses of Anthropic Managed Agents sessions through the gate, and serves the gate over HTTP.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sconf,categories=gate
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.status.policy`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SessionConfirmer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the confirmer.
	// +required
	Spec SessionConfirmerSpec `json:"spec"`

	// status is written by the controller.
	// +optional
	Status SessionConfirmerStatus `json:"status,omitempty"`
}

// SessionConfirmerList is a list of SessionConfirmer.
//
// +kubebuilder:object:root=true
type SessionConfirmerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SessionConfirmer `json:"items"`
}
