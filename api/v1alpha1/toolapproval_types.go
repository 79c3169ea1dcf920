package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApprovalSurface is the runtime lane a ToolApproval's call came from.
// +kubebuilder:validation:Enum=ManagedAgents;Harness;Workflow;Hook
type ApprovalSurface string

const (
	// SurfaceManagedAgents is a paused Anthropic Managed Agents call, answered by the confirmer.
	SurfaceManagedAgents ApprovalSurface = "ManagedAgents"
	// SurfaceHarness is an @ai-sdk/harness approval request sent to POST /v1/harness/approvals.
	SurfaceHarness ApprovalSurface = "Harness"
	// SurfaceWorkflow is an @ai-sdk/workflow needsApproval call sent to POST /v1/workflow/needs-approval.
	SurfaceWorkflow ApprovalSurface = "Workflow"
	// SurfaceHook is a Claude Code PreToolUse hook call in a sandbox pod, held by its gate-agent
	// sidecar (a "defer" answer) and sent to POST /v1/hook/approvals (docs/gate-agent.md).
	SurfaceHook ApprovalSurface = "Hook"
)

// ToolApprovalState is where a ToolApproval stands. Every state but Pending is final.
// +kubebuilder:validation:Enum=Pending;Approved;Denied;Expired;AnsweredInRuntime
type ToolApprovalState string

const (
	// ApprovalPending means no answer yet.
	ApprovalPending ToolApprovalState = "Pending"
	// ApprovalApproved means a user allowed to approve the policy approved the call.
	ApprovalApproved ToolApprovalState = "Approved"
	// ApprovalDenied means a user allowed to approve the policy denied the call.
	ApprovalDenied ToolApprovalState = "Denied"
	// ApprovalExpired means nobody answered before spec.expiresAt; the call was denied.
	ApprovalExpired ToolApprovalState = "Expired"
	// ApprovalAnsweredInRuntime means the call was answered outside the cluster (the runtime's own
	// console) before anyone answered here; the confirmer recorded that and sent nothing.
	ApprovalAnsweredInRuntime ToolApprovalState = "AnsweredInRuntime"
)

// Condition types of ToolApproval, one per final state.
const (
	ConditionApproved          = "Approved"
	ConditionDenied            = "Denied"
	ConditionExpired           = "Expired"
	ConditionAnsweredInRuntime = "AnsweredInRuntime"
)

// ApproveVerb is the custom verb on harnessagentpolicies (resource name = the policy) that a user
// needs to approve or deny the calls held by that policy's rules, as the "approve" verb on
// signers gates CertificateSigningRequests.
const ApproveVerb = "approve"

// ToolApprovalInput describes the input of the held call without carrying it.
type ToolApprovalInput struct {
	// size of the call's input in bytes (its JSON text).
	// +required
	// +kubebuilder:validation:Minimum=0
	Size int64 `json:"size"`

	// sha256 of the call's input, lower-case hex, for matching against the runtime's own record.
	// +required
	// +kubebuilder:validation:MinLength=64
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-f]{64}$')",message="must be 64 lower-case hex digits"
	SHA256 string `json:"sha256"`

	// preview is the input's first bytes, present only when the SessionConfirmer's spec.humanApproval.showInput is true.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Preview string `json:"preview,omitempty"`

	// truncated is true when preview is shorter than the input.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
}

// ToolApprovalPod is the pod a Hook call was made in, as its token's review named it.
type ToolApprovalPod struct {
	// name of the pod, in this namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// uid of the pod: a pod of the same name created later is another pod.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
}

// ToolApprovalSpec says what a human is asked to decide. It is immutable.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a ToolApproval records the call that was held"
type ToolApprovalSpec struct {
	// surface is the runtime lane the call came from.
	// +required
	Surface ApprovalSurface `json:"surface"`

	// policy is the HarnessAgentPolicy, in this namespace, whose verdict sent the call to a human. Approvers need the verb approve on it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Policy string `json:"policy"`

	// sessionID is the Managed Agents session, or the run or thread id harness or workflow code gave.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	SessionID string `json:"sessionID,omitempty"`

	// agentID is the Managed Agents agent of the session, when known.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	AgentID string `json:"agentID,omitempty"`

	// toolUseID identifies the call in its runtime (the tool_use event id, or the approval id).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ToolUseID string `json:"toolUseID"`

	// tool is the name of the tool being called.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Tool string `json:"tool"`

	// clusterPolicy is the ClusterHarnessAgentPolicy whose layer's Ask held the call, when a cluster layer decided it (docs/fleet.md); empty when policy did. Approvers then need the verb approve on clusterharnessagentpolicies/<clusterPolicy> in this namespace instead: a namespace's approvers cannot lift a baseline's Ask.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ClusterPolicy string `json:"clusterPolicy,omitempty"`

	// rule is the rule whose Ask verdict held the call; empty when the policy's defaultAction did.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Rule string `json:"rule,omitempty"`

	// reason is the rule's reason, what the approver is asked to judge.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Reason string `json:"reason,omitempty"`

	// snapshotDigest is the digest of the rules snapshot that decided (sha256:<hex>).
	// +optional
	// +kubebuilder:validation:MaxLength=80
	SnapshotDigest string `json:"snapshotDigest,omitempty"`

	// input describes the call's input: its size and SHA-256, and a preview only when opted in.
	// +required
	Input ToolApprovalInput `json:"input"`

	// pod is the sandbox pod whose gate-agent sidecar held the call (surface Hook): the pod its ServiceAccount token was bound to. Only that pod's sidecar reads the answer.
	// +optional
	Pod *ToolApprovalPod `json:"pod,omitempty"`

	// expiresAt is the deadline: without an answer by then the call is denied, and a later answer is refused.
	// +required
	ExpiresAt metav1.Time `json:"expiresAt"`
}

// ToolApprovalDecision records who decided and when. The user, uid and groups are set by the
// admission webhook from the request's authenticated identity, never taken from the client.
type ToolApprovalDecision struct {
	// user is the username of the decider.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	User string `json:"user,omitempty"`

	// uid of the decider, when the authenticator gives one.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	UID string `json:"uid,omitempty"`

	// groups of the decider.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	Groups []string `json:"groups,omitempty"`

	// time the decision was admitted.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`

	// message from the decider; for a denial it is part of the refusal the agent reads.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// ToolApprovalStatus is the answer. Once state leaves Pending it never changes again.
type ToolApprovalStatus struct {
	// state is Pending until a human approves or denies, the deadline passes (Expired), or the runtime's own console answers first (AnsweredInRuntime).
	// +optional
	// +kubebuilder:default=Pending
	State ToolApprovalState `json:"state,omitempty"`

	// decision records who decided, when, and their message.
	// +optional
	Decision *ToolApprovalDecision `json:"decision,omitempty"`

	// conditions: one of Approved, Denied, Expired or AnsweredInRuntime, True, once decided.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ToolApproval is one tool call the gate sent to a human. The confirmer creates it; a user with the verb approve on the policy answers it (kubectl gate approve / deny), through the status subresource; the confirmer sends the answer to the runtime once.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tapr,categories=gate
// +kubebuilder:printcolumn:name="Tool",type=string,JSONPath=`.spec.tool`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policy`
// +kubebuilder:printcolumn:name="Rule",type=string,JSONPath=`.spec.rule`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`
type ToolApproval struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says what is being asked; immutable.
	// +required
	Spec ToolApprovalSpec `json:"spec"`

	// status is the answer; Pending until someone decides.
	// +optional
	// +kubebuilder:default={}
	Status ToolApprovalStatus `json:"status,omitempty"`
}

// ToolApprovalList is a list of ToolApproval.
//
// +kubebuilder:object:root=true
type ToolApprovalList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ToolApproval `json:"items"`
}
