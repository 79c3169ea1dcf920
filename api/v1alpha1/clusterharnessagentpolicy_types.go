package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterHarnessAgentPolicySpec declares a cluster baseline: rules that every sandbox pod it
// selects is decided by, beside (never instead of) the pod's namespace policy. For each call the
// gate decides every layer that selects the pod and the most restrictive verdict wins (Block >
// Ask > Allow, a fault is a Block), so a namespace policy can tighten a cluster policy and never
// weaken it. docs/fleet.md has the model.
type ClusterHarnessAgentPolicySpec struct {
	// namespaceSelector selects the namespaces whose sandbox pods the policy governs. Empty selects every namespace. The bootstrap bundles of the namespace policies in those namespaces carry this policy as a layer.
	// +required
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`

	// podSelector selects the governed pods within those namespaces, by the pods' own labels, which the hook reads from its pod's downward API file. Empty selects every pod. Labels are the namespace's to set: a platform baseline that no tenant may step out of selects by namespace only.
	// +optional
	PodSelector metav1.LabelSelector `json:"podSelector,omitempty"`

	// skipContainers are the containers and native sidecars (by name) that a pod this policy selects may leave out of the injection with the annotation gate.intutic.io/inject-skip-containers, such as a service mesh's proxy: a pod that names any other one there is refused, so no tenant can run an agent beside the hook.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	SkipContainers []string `json:"skipContainers,omitempty"`

	// priority orders the layers in decisions and reports: lower first, then by name; the namespace policy comes last. It never changes a verdict: the most restrictive one wins whatever the order, and among equally restrictive verdicts the first layer supplies the rule, reason and code. From 1 to 1000 (0 is not a priority, so that an unset one is never taken for the first).
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Priority int32 `json:"priority,omitempty"`

	// permissionMode is the harness permission posture floor: the most restrictive of this and the namespace policy's wins (allow-reads over allow-edits) in the bundles of the selected namespaces.
	// +optional
	PermissionMode PermissionMode `json:"permissionMode,omitempty"`

	// filterBash, when true, removes the harness's built-in bash tool in the bundles of the selected namespaces whatever the namespace policy says; false or unset leaves the namespace policy's choice.
	// +optional
	FilterBash *bool `json:"filterBash,omitempty"`

	// rules are evaluated for every call of a selected pod, in the language, call view and functions of HarnessAgentPolicy rules; caller.namespace is the pod's namespace and caller.policy this policy's name. The most restrictive verdict of the matching rules is this layer's answer; among those, the first one in this list supplies the reason and code. Names are unique.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=512
	// +kubebuilder:validation:XValidation:rule="self.map(r, size(r.name) + (has(r.when) ? size(r.when) : 0) + (has(r.reason) ? size(r.reason) : 0) + (has(r.code) ? size(r.code) : 0) + (has(r.tools) ? r.tools.map(t, size(t)).sum() : 0)).sum() <= 163840",message="the rules' names, tools, expressions, reasons and codes add up to more than 160 KiB: their snapshot must fit in the bootstrap ConfigMaps it is published in (1 MiB each); split the policy"
	Rules []Rule `json:"rules,omitempty"`

	// defaultAction is this layer's verdict when none of its rules match. Allow leaves the call to the other layers.
	// +optional
	// +kubebuilder:default=Allow
	DefaultAction Action `json:"defaultAction,omitempty"`

	// enforcement is Enforce or Audit, as for HarnessAgentPolicy: in Audit this layer's Ask and Block verdicts are recorded as would-ask and would-block and do not hold the call; faults still block. A rule's own enforcement overrides it.
	// +optional
	// +kubebuilder:default=Enforce
	Enforcement Enforcement `json:"enforcement,omitempty"`

	// failurePolicy says what a rule whose evaluation errors does: Fail blocks the call, Ignore skips the rule.
	// +optional
	// +kubebuilder:default=Fail
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`

	// egress is a ceiling on the egress of the sandbox pods in the selected namespaces, whatever its podSelector: each namespace policy's NetworkPolicy there allows only the intersection of its own destinations and ports with those of every ceiling selecting its namespace, and this ceiling's deniedCIDRs are carved out of all of them. No allowedHosts and no allowedCIDRs is a ceiling of nothing: all egress denied. A tenant NetworkPolicy there that would let a pod reach beyond the ceiling is refused at admission. Absent, the policy sets no ceiling.
	// +optional
	Egress *EgressSpec `json:"egress,omitempty"`

	// exceptions says in which namespaces GateExceptions may lift this policy's rules, and for how long at most. Absent, none may.
	// +optional
	Exceptions *ClusterExceptionPolicy `json:"exceptions,omitempty"`

	// decisionRecords says what the decision records of the calls of the pods this policy selects hold beyond the default (the input's size and SHA-256). It applies with the namespace policy's: the input is recorded when either opts in, with the masks of both.
	// +optional
	DecisionRecords *DecisionRecordsSpec `json:"decisionRecords,omitempty"`
}

// SystemNamespaces are the namespaces no ClusterHarnessAgentPolicy governs, whatever its
// namespaceSelector (and neither does the operator's own namespace): the manager publishes no
// baseline there, keeps no pod webhook entry for them and injects no pod there, so a manager
// outage never stops the cluster's own pods.
var SystemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// ClusterHarnessAgentPolicyStatus is the observed state of a ClusterHarnessAgentPolicy.
type ClusterHarnessAgentPolicyStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: RulesCompiled, and Ready derived from it.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// snapshotDigest is the digest of the rules snapshot this policy publishes (sha256:<hex>), the same in every bundle of a workspace; a decision this layer made names it.
	// +optional
	SnapshotDigest string `json:"snapshotDigest,omitempty"`

	// ruleCount is the number of rules in the snapshot in force.
	// +optional
	RuleCount int32 `json:"ruleCount,omitempty"`

	// enforcement is the enforcement of the snapshot in force: Enforce or Audit. A snapshot of rules that never compiled blocks every call, and is Enforce.
	// +optional
	Enforcement Enforcement `json:"enforcement,omitempty"`

	// auditedRules is how many rules of the snapshot in force are in Audit.
	// +optional
	AuditedRules int32 `json:"auditedRules,omitempty"`

	// namespaces is how many namespaces the namespaceSelector selects, in each of which this layer is in force: the namespace's baseline bundle (ConfigMap gate-baseline-bootstrap, for the pods no namespace policy governs) and the bundles of its namespace policies carry it. kube-system, kube-public, kube-node-lease and the operator's namespace get no baseline, and count only when they have a namespace policy.
	// +optional
	Namespaces int32 `json:"namespaces"`

	// pods is how many running pods of those namespaces mount a bootstrap bundle (a namespace policy's, or the baseline: labelled gate.intutic.io/baseline) and match the podSelector: the pods this layer decides for.
	// +optional
	Pods int32 `json:"pods"`
}

// ClusterHarnessAgentPolicy is a cluster baseline for sandboxed AI coding agents: rules decided for every pod it selects, which no namespace policy can weaken.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=chap,categories=gate
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label (at most 63 lower-case letters, digits and '-'): it names the policy's file in every bundle"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Rules",type=integer,JSONPath=`.status.ruleCount`
// +kubebuilder:printcolumn:name="Enforcement",type=string,JSONPath=`.status.enforcement`
// +kubebuilder:printcolumn:name="Namespaces",type=integer,JSONPath=`.status.namespaces`
// +kubebuilder:printcolumn:name="Pods",type=integer,JSONPath=`.status.pods`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterHarnessAgentPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the baseline.
	// +required
	Spec ClusterHarnessAgentPolicySpec `json:"spec"`

	// status is written by the controller.
	// +optional
	Status ClusterHarnessAgentPolicyStatus `json:"status,omitempty"`
}

// ClusterHarnessAgentPolicyList is a list of ClusterHarnessAgentPolicy.
//
// +kubebuilder:object:root=true
type ClusterHarnessAgentPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterHarnessAgentPolicy `json:"items"`
}
