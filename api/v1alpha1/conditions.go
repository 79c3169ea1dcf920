package v1alpha1

// Condition types. Ready is derived from the others of its kind.
const (
	// ConditionReady summarises the other conditions of the object.
	ConditionReady = "Ready"

	// ConditionRulesCompiled: every rule of the policy compiled.
	ConditionRulesCompiled = "RulesCompiled"
	// ConditionBootstrapRendered: the bootstrap ConfigMap holds the current bundle.
	ConditionBootstrapRendered = "BootstrapRendered"
	// ConditionEgressEnforced: the egress NetworkPolicy enforces the declared egress, unshadowed.
	ConditionEgressEnforced = "EgressEnforced"

	// ConditionPolicyResolved: the referenced policy exists and is Ready.
	ConditionPolicyResolved = "PolicyResolved"
	// ConditionAvailable: the confirmer Deployment is available.
	ConditionAvailable = "Available"
)

// Condition reasons of HarnessAgentPolicy. A reason is the cause of the condition's status;
// the condition's message says what to do about it.
const (
	ReasonCompiled       = "Compiled"
	ReasonCompileFailed  = "CompileFailed"
	ReasonRendered       = "Rendered"
	ReasonLastGoodKept   = "LastGoodKept"
	ReasonBundleTooLarge = "BundleTooLarge"
	// ReasonLayersTooLarge: the policy's snapshot and the cluster layers selecting its
	// namespace do not fit in one ConfigMap together; the bundle blocks every call.
	ReasonLayersTooLarge    = "LayersTooLarge"
	ReasonPolicyInvalid     = "PolicyInvalid"
	ReasonEnforced          = "Enforced"
	ReasonHostsUnresolved   = "HostsUnresolved"
	ReasonAddressesRejected = "AddressesRejected"
	ReasonShadowedByPolicy  = "ShadowedByPolicy"
	// ReasonOutsideCeiling: destinations or ports the policy lists lie outside the egress
	// ceiling of a ClusterHarnessAgentPolicy selecting its namespace, and are not reachable.
	ReasonOutsideCeiling = "OutsideCeiling"
)

// Condition reasons of SessionConfirmer.
const (
	ReasonPolicyResolved    = "PolicyResolved"
	ReasonPolicyNotFound    = "PolicyNotFound"
	ReasonPolicyNotReady    = "PolicyNotReady"
	ReasonSecretMissing     = "SecretMissing"
	ReasonDeploymentPending = "DeploymentPending"
	ReasonAvailable         = "Available"
	ReasonUnavailable       = "Unavailable"
	// ReasonPolicyNamespaceForbidden: spec.policyRef.namespace names another namespace, and
	// the SessionConfirmer is not in one of the manager's platform namespaces (or that
	// namespace is not served); nothing is rendered.
	ReasonPolicyNamespaceForbidden = "PolicyNamespaceForbidden"
)

// Condition reasons of both kinds.
const (
	// ReasonReady: every other condition is True.
	ReasonReady = "Ready"
	// ReasonApplyFailed: the API server refused a child; the message names it and quotes the
	// API server.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonReconcileFailed: the controller could not read what it needs (the message says
	// what); nothing was changed.
	ReasonReconcileFailed = "ReconcileFailed"
)

// Labels and annotations on children.
const (
	// LabelManagedBy marks every child of the operator.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "gate-operator"
	// LabelPolicy names the HarnessAgentPolicy a child belongs to.
	LabelPolicy = "gate.intutic.io/policy"
	// LabelBaseline marks the baseline bundle and egress NetworkPolicy the manager publishes in
	// every namespace a ClusterHarnessAgentPolicy selects, and the pods the injection governs
	// with them (no namespace policy selects those): the NetworkPolicy selects pods by it.
	LabelBaseline = "gate.intutic.io/baseline"
	// LabelConfirmer names the SessionConfirmer a child belongs to.
	LabelConfirmer = "gate.intutic.io/confirmer"
	// AnnotationBootstrapHash carries the bootstrap hash on the bootstrap ConfigMap.
	AnnotationBootstrapHash = "gate.intutic.io/bootstrap-hash"
	// AnnotationEgressCeilings on an egress NetworkPolicy identifies the egress ceilings it was
	// rendered within; absent when none bounds it.
	AnnotationEgressCeilings = "gate.intutic.io/egress-ceilings"
	// AnnotationInjection on a pod the injection governed names what it rendered (the pod
	// webhook's render digest): the posture Report compares it with the manager's to find pods
	// injected by another version, and its absence finds pods a policy selects that were never
	// injected.
	AnnotationInjection = "gate.intutic.io/injection"
	// FieldManager is the server-side apply field manager of the operator.
	FieldManager = "gate-operator"
)

// Condition reasons of ToolApproval, on the condition of the final state they settle it in.
const (
	// ReasonApprovedByUser (Approved) and ReasonDeniedByUser (Denied): an approver answered
	// with kubectl gate.
	ReasonApprovedByUser = "ApprovedByUser"
	ReasonDeniedByUser   = "DeniedByUser"
	// ReasonNoAnswer (Expired): nobody answered before spec.expiresAt; the call was denied.
	ReasonNoAnswer = "NoAnswer"
	// ReasonRuntimeAllow and ReasonRuntimeDeny (AnsweredInRuntime): the runtime's own console
	// allowed or denied the call first; ReasonRuntimeAnswered when it recorded no result.
	ReasonRuntimeAllow    = "RuntimeAllow"
	ReasonRuntimeDeny     = "RuntimeDeny"
	ReasonRuntimeAnswered = "RuntimeAnswered"
)
