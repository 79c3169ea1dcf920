package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PermissionMode is the harness permission posture of the governed agents: allow-reads or allow-edits. Both checks are CEL rules rather than an enum so that allow-all gets a message saying why it is refused (the API server skips CEL rules on a value that failed the enum).
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:XValidation:rule="self != 'allow-all'",message="allow-all is not permitted: it lets the agent run every tool without asking, which bypasses the gate's Ask verdicts; use allow-edits or allow-reads"
// +kubebuilder:validation:XValidation:rule="self == 'allow-all' || self in ['allow-reads', 'allow-edits']",message="must be allow-reads or allow-edits"
type PermissionMode string

const (
	// PermissionModeAllowReads lets the agent read without asking; every edit needs approval.
	PermissionModeAllowReads PermissionMode = "allow-reads"
	// PermissionModeAllowEdits lets the agent read and edit files without asking.
	PermissionModeAllowEdits PermissionMode = "allow-edits"
)

// Action is the verdict a rule gives when it matches.
// +kubebuilder:validation:Enum=Allow;Ask;Block
type Action string

const (
	// ActionAllow lets the call proceed (subject to the agent's own permission flow).
	ActionAllow Action = "Allow"
	// ActionAsk holds the call for a human.
	ActionAsk Action = "Ask"
	// ActionBlock refuses the call.
	ActionBlock Action = "Block"
)

// FailurePolicy says what a rule whose evaluation errors does. It does not cover input a rule
// cannot judge within the CEL cost limit: that call is blocked (code input_too_costly) either way.
// +kubebuilder:validation:Enum=Fail;Ignore
type FailurePolicy string

const (
	// FailurePolicyFail blocks the call when a rule errors.
	FailurePolicyFail FailurePolicy = "Fail"
	// FailurePolicyIgnore skips a rule that errors.
	FailurePolicyIgnore FailurePolicy = "Ignore"
)

// Enforcement says whether the gate's Ask and Block verdicts take effect: Enforce or Audit.
// +kubebuilder:validation:Enum=Enforce;Audit
type Enforcement string

const (
	// EnforcementEnforce means an Ask holds the call for a human and a Block refuses it.
	EnforcementEnforce Enforcement = "Enforce"
	// EnforcementAudit means Ask and Block verdicts are recorded as would-ask and would-block, and
	// the call proceeds; faults still block.
	EnforcementAudit Enforcement = "Audit"
)

// Hostname is a DNS name such as github.com: no scheme, port, path or wildcard.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?[.])*[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$')",message="must be a lower-case DNS name such as github.com, with no scheme, port, path or wildcard"
// +kubebuilder:validation:XValidation:rule="!isIP(self)",message="is an IP address, not a host name: put it in allowedCIDRs as a /32 or /128"
type Hostname string

// CIDR is an IPv4 or IPv6 network in CIDR notation, such as 10.0.0.0/8 or fd00::/8.
// +kubebuilder:validation:MaxLength=49
// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a CIDR such as 10.0.0.0/8 or fd00::/8"
type CIDR string

// ToolName is the name of a custom host-executed tool.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=128
type ToolName string

// HarnessAgentPolicySpec declares how the sandboxed agents selected by podSelector are governed.
type HarnessAgentPolicySpec struct {
	// workspaceID binds the rules snapshot to a workspace. The gate refuses a snapshot whose workspace differs from the one it was configured with.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	WorkspaceID string `json:"workspaceID,omitempty"`

	// podSelector selects the sandbox pods in this namespace that the policy governs. The egress NetworkPolicy selects the same pods.
	// +required
	PodSelector metav1.LabelSelector `json:"podSelector"`

	// permissionMode is the harness permission posture: allow-reads (every edit needs approval) or allow-edits. allow-all is rejected, because it would let the agent skip every approval.
	// +optional
	// +kubebuilder:default=allow-edits
	PermissionMode PermissionMode `json:"permissionMode,omitempty"`

	// filterBash removes the harness's built-in bash tool (inactiveTools: ["bash"]), so shell access goes only through tools the gate sees.
	// +optional
	// +kubebuilder:default=true
	FilterBash *bool `json:"filterBash,omitempty"`

	// tools is the static approval record for custom host-executed tools.
	// +optional
	Tools StaticToolApprovals `json:"tools,omitempty"`

	// rules are evaluated by the gate for every tool call, in order. The most restrictive verdict of the matching rules wins (Block > Ask > Allow); among those, the first one in this list supplies the reason and code. Names are unique.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=512
	// +kubebuilder:validation:XValidation:rule="self.map(r, size(r.name) + (has(r.when) ? size(r.when) : 0) + (has(r.reason) ? size(r.reason) : 0) + (has(r.code) ? size(r.code) : 0) + (has(r.tools) ? r.tools.map(t, size(t)).sum() : 0)).sum() <= 163840",message="the rules' names, tools, expressions, reasons and codes add up to more than 160 KiB: their snapshot must fit in the bootstrap ConfigMap (1 MiB); split the policy"
	Rules []Rule `json:"rules,omitempty"`

	// defaultAction is the verdict when no rule matches.
	// +optional
	// +kubebuilder:default=Allow
	DefaultAction Action `json:"defaultAction,omitempty"`

	// enforcement is Enforce or Audit. In Audit the gate decides every call as usual, but an Ask or Block (of a rule, or of defaultAction) is recorded as would-ask or would-block and the call proceeds as Allow: gate-hook exits 0 with a systemMessage saying so, the harness and workflow responders approve with a "would" field, the confirmer allows, and each decision's audit line and metrics carry mode audit. Audit never lets a fault through: a missing, corrupt or unverified snapshot, a crashed gate, rules that never compiled, input the gate cannot read (input_invalid) or judge within the cost limit (input_too_costly) still block. A rule's own enforcement overrides this one; an audited rule never changes what the enforced rules and defaultAction decide.
	// +optional
	// +kubebuilder:default=Enforce
	Enforcement Enforcement `json:"enforcement,omitempty"`

	// failurePolicy says what a rule whose evaluation errors does: Fail blocks the call, Ignore skips the rule. Input too large for a rule to judge within the CEL cost limit is not an error of the rule: the call is blocked (code input_too_costly) under either policy.
	// +optional
	// +kubebuilder:default=Fail
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`

	// exceptions says for how long GateExceptions of this namespace may lift this policy's rules at most. Absent, none may.
	// +optional
	Exceptions *NamespaceExceptionPolicy `json:"exceptions,omitempty"`

	// egress declares the network destinations the sandbox pods may reach. With no hosts and no CIDRs, all egress (DNS included) is denied but TCP to the manager's egress canary control port, which every egress policy allows so that the pods' wait-for-egress-policy init container can prove the policy enforced.
	// +optional
	// +kubebuilder:default={}
	Egress EgressSpec `json:"egress,omitempty"`

	// gateAgent sets the resources of the gate-agent native sidecar the pod webhook adds to the governed pods: the long-lived decider the pod's hook asks. Absent, it requests 10m CPU and 32Mi memory and is limited to 128Mi.
	// +optional
	GateAgent *GateAgentSpec `json:"gateAgent,omitempty"`

	// decisionRecords says what the decision records of this policy's calls hold beyond the default: the tool input's size and SHA-256, never the input itself.
	// +optional
	DecisionRecords *DecisionRecordsSpec `json:"decisionRecords,omitempty"`
}

// DecisionRecordsSpec says what a policy's decision records hold (docs/decision-log.md).
type DecisionRecordsSpec struct {
	// input opts the records of this policy's calls into holding the tool input, with the masks it lists applied first. Absent, records hold the input's size and SHA-256 only.
	// +optional
	Input *RecordedInput `json:"input,omitempty"`
}

// RecordedInput is an opt-in to tool input in decision records: only with masks, JSON pointers (RFC 6901) into the tool input of every tool, such as /content or /command. A pointer that a call's input does not hold is skipped; a record lists the pointers it applied in erased and masked. Input that is larger than 16 KiB once masked is left out, and the record says so.
//
// +kubebuilder:validation:XValidation:rule="size(has(self.erase) ? self.erase : []) + size(has(self.hash) ? self.hash : []) > 0",message="an input opt-in lists at least one mask: a JSON pointer to erase or to hash"
type RecordedInput struct {
	// erase are JSON pointers to members removed from the input before it is recorded, such as /content.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	Erase []JSONPointer `json:"erase,omitempty"`

	// hash are JSON pointers to members whose values are recorded as the SHA-256 of their JSON encoding ("sha256:<hex>"), such as /command: equal values stay comparable across records without being readable. A pointer both erased and hashed is erased.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	Hash []JSONPointer `json:"hash,omitempty"`
}

// JSONPointer is an RFC 6901 JSON pointer into a tool input: /name, /name/0, with ~1 for a slash and ~0 for a tilde in a name.
// +kubebuilder:validation:MinLength=2
// +kubebuilder:validation:MaxLength=256
// +kubebuilder:validation:Pattern=`^(/([^~/]|~[01])*)+$`
type JSONPointer string

// GateAgentSpec configures the gate-agent sidecar of a policy's pods.
type GateAgentSpec struct {
	// resources are the sidecar's requests and limits, replacing the defaults whole.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// humanApproval sends the Ask verdicts of the pods' Claude Code calls to a human instead of Claude Code's own prompt, which a headless agent answers with a deny: the sidecar creates a ToolApproval through the named SessionConfirmer's gate API and answers the hook "defer", which ends a print-mode run with the call pending; resumed (claude -p --resume), the call runs only if the approval was approved and the rules in force still ask. Absent, an Ask is Claude Code's prompt as before.
	// +optional
	HumanApproval *GateAgentHumanApproval `json:"humanApproval,omitempty"`
}

// GateAgentHumanApproval names the SessionConfirmer that holds a policy's hook approvals.
type GateAgentHumanApproval struct {
	// confirmer is a SessionConfirmer in the policy's namespace whose spec.policyRef is this policy. Its gate API must admit the pods' ServiceAccount (spec.gateAPI.allowedServiceAccounts); the pods' egress policy gains its API port, and DNS, for the sidecar.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Confirmer string `json:"confirmer"`
}

// StaticToolApprovals is the static approval record for custom host-executed tools.
//
// +kubebuilder:validation:XValidation:rule="!has(self.approve) || !has(self.deny) || self.approve.all(t, !(t in self.deny))",message="tools.approve and tools.deny must not name the same tool"
type StaticToolApprovals struct {
	// approve lists tools whose every call pauses for approval; the gate answers each one (harness toolApproval "user-approval").
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	Approve []ToolName `json:"approve,omitempty"`

	// deny lists tools that are refused unconditionally (harness toolApproval "denied").
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	Deny []ToolName `json:"deny,omitempty"`
}

// MaxRulesTextBytes bounds what a policy's rules add up to (names, tools, expressions, reasons
// and codes), as the schema's rule on spec.rules says: with the prefilters and JSON escaping
// the snapshot derives from them, the bootstrap bundle still fits in a ConfigMap.
const MaxRulesTextBytes = 163840

// Rule is one gate rule: when a call's tool matches one of tools and when is true, the rule gives its action.
//
// +kubebuilder:validation:XValidation:rule="self.action == 'Allow' || (has(self.reason) && size(self.reason) > 0)",message="reason is required when action is Ask or Block: it is the message the agent and the approver see"
type Rule struct {
	// name identifies the rule in decisions, audit logs and status. A DNS label, unique within the policy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit"
	Name string `json:"name"`

	// tools are glob patterns on the tool name (case-insensitive; outside mcp__ names, '_' and '-' are ignored, so web_fetch matches WebFetch). MCP tools are named mcp__<server>__<tool>. Empty matches every tool.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Tools []string `json:"tools,omitempty"`

	// when is a CEL expression over tool, server, input, surface and session that must be true for the rule to apply. Empty means always.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	When string `json:"when,omitempty"`

	// action is the verdict of the rule: Allow, Ask or Block.
	// +required
	Action Action `json:"action"`

	// reason is the human-readable explanation. A Block is refused with "[Intutic Governance] BLOCKED: <reason>".
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// code is an optional machine-readable code carried by decisions, such as destructive_command.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9_]*[a-z0-9])?$`
	Code string `json:"code,omitempty"`

	// enforcement overrides the policy's spec.enforcement for this rule: Audit to try a new rule out (its Ask or Block is recorded as would-ask or would-block, and it never changes what the enforced rules and defaultAction decide; when it cannot be evaluated under failurePolicy Fail, that too is only recorded), Enforce to enforce it in a policy in Audit. Empty is the policy's.
	// +optional
	Enforcement Enforcement `json:"enforcement,omitempty"`
}

// EgressSpec declares where the sandbox pods may connect.
type EgressSpec struct {
	// allowedHosts are DNS names the pods may reach on ports. The controller resolves them (A and AAAA) and re-resolves them at the records' TTL. An address a name resolves to that is loopback, unspecified, link-local, multicast, in a denied range or in the cluster's Service and Pod ranges is left out and named in the EgressEnforced condition; list a private destination in allowedCIDRs to reach it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	AllowedHosts []Hostname `json:"allowedHosts,omitempty"`

	// allowedCIDRs are networks the pods may reach on ports.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	AllowedCIDRs []CIDR `json:"allowedCIDRs,omitempty"`

	// deniedCIDRs are carved out of every allowed destination. The link-local ranges 169.254.0.0/16 and fe80::/10 and the cloud metadata and platform endpoints (such as 168.63.129.16 and fd00:ec2::254) are always denied; docs/egress-carve-outs.md lists them with their sources.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	DeniedCIDRs []CIDR `json:"deniedCIDRs,omitempty"`

	// ports are the TCP ports allowed to the allowed destinations.
	// +optional
	// +listType=set
	// +kubebuilder:default={443}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	Ports []int32 `json:"ports,omitempty"`
}

// EgressMode says how the egress NetworkPolicy restricts the pods.
type EgressMode string

const (
	// EgressModeDenyAll denies all egress, DNS included, but the manager's egress canary
	// control port.
	EgressModeDenyAll EgressMode = "DenyAll"
	// EgressModeAllowList allows DNS and the listed destinations only.
	EgressModeAllowList EgressMode = "AllowList"
)

// EgressStatus summarises the egress the controller enforces.
type EgressStatus struct {
	// mode is DenyAll or AllowList.
	// +optional
	Mode EgressMode `json:"mode,omitempty"`

	// resolvedHosts is how many of allowedHosts resolved to at least one address.
	// +optional
	ResolvedHosts int32 `json:"resolvedHosts,omitempty"`

	// unresolvedHosts are the allowedHosts that resolved to no address; they are not reachable.
	// +optional
	// +listType=atomic
	UnresolvedHosts []string `json:"unresolvedHosts,omitempty"`

	// addresses is how many host addresses the NetworkPolicy allows.
	// +optional
	Addresses int32 `json:"addresses,omitempty"`

	// ceilings are the ClusterHarnessAgentPolicies whose egress ceiling bounds this NetworkPolicy, by name.
	// +optional
	// +listType=atomic
	Ceilings []string `json:"ceilings,omitempty"`

	// outsideCeiling are the destinations and ports of spec.egress that a ceiling leaves out; they are not reachable.
	// +optional
	// +listType=atomic
	OutsideCeiling []string `json:"outsideCeiling,omitempty"`

	// When the hosts are resolved again is not status: it changes on every resolution, and
	// writing it would cost every policy with hosts a write per resolution. The reconciler's
	// requeue keeps it.
}

// HarnessAgentPolicyStatus is the observed state of a HarnessAgentPolicy.
type HarnessAgentPolicyStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: RulesCompiled, BootstrapRendered, EgressEnforced, and Ready derived from them.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// bootstrapHash is the hash of the bootstrap bundle in force (sha256:<hex>).
	// +optional
	BootstrapHash string `json:"bootstrapHash,omitempty"`

	// snapshotDigest is the digest of the rules snapshot in force (sha256:<hex>).
	// +optional
	SnapshotDigest string `json:"snapshotDigest,omitempty"`

	// bootstrapConfigMap is the name of the bootstrap ConfigMap.
	// +optional
	BootstrapConfigMap string `json:"bootstrapConfigMap,omitempty"`

	// networkPolicy is the name of the egress NetworkPolicy.
	// +optional
	NetworkPolicy string `json:"networkPolicy,omitempty"`

	// ruleCount is the number of rules in the snapshot in force.
	// +optional
	RuleCount int32 `json:"ruleCount,omitempty"`

	// enforcement is the enforcement of the snapshot in force: Enforce or Audit. A snapshot of rules that never compiled blocks every call, and is Enforce.
	// +optional
	Enforcement Enforcement `json:"enforcement,omitempty"`

	// auditedRules is how many rules of the snapshot in force are in Audit, by their own enforcement or the policy's.
	// +optional
	AuditedRules int32 `json:"auditedRules,omitempty"`

	// egress summarises the egress in force.
	// +optional
	Egress *EgressStatus `json:"egress,omitempty"`

	// clusterPolicies are the ClusterHarnessAgentPolicies whose layers the bundle in force carries, in the order decisions report them (priority, then name). Each decides its pods' calls beside this policy; the most restrictive verdict wins.
	// +optional
	// +listType=atomic
	ClusterPolicies []string `json:"clusterPolicies,omitempty"`
}

// HarnessAgentPolicy governs the sandboxed AI coding agents selected by its pod selector: the rules the gate evaluates, the harness permission posture, and the egress they get.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=hap,categories=gate
// +kubebuilder:validation:XValidation:rule="self.metadata.name != 'gate-baseline'",message="metadata.name gate-baseline is reserved: its bundle would be the cluster baseline's ConfigMap gate-baseline-bootstrap"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Rules",type=integer,JSONPath=`.status.ruleCount`
// +kubebuilder:printcolumn:name="Egress",type=string,JSONPath=`.status.egress.mode`
// +kubebuilder:printcolumn:name="Enforcement",type=string,JSONPath=`.status.enforcement`
// +kubebuilder:printcolumn:name="Audited",type=integer,JSONPath=`.status.auditedRules`,priority=1
// +kubebuilder:printcolumn:name="Cluster-Policies",type=string,JSONPath=`.status.clusterPolicies`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HarnessAgentPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the governance.
	// +required
	Spec HarnessAgentPolicySpec `json:"spec"`

	// status is written by the controller.
	// +optional
	Status HarnessAgentPolicyStatus `json:"status,omitempty"`
}

// HarnessAgentPolicyList is a list of HarnessAgentPolicy.
//
// +kubebuilder:object:root=true
type HarnessAgentPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HarnessAgentPolicy `json:"items"`
}
