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

// Labels and annotations on children.
const (
	// LabelManagedBy marks every child of the operator.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "gate-operator"
	// LabelPolicy names the HarnessAgentPolicy a child belongs to.
	LabelPolicy = "gate.intutic.io/policy"
	// LabelConfirmer names the SessionConfirmer a child belongs to.
	LabelConfirmer = "gate.intutic.io/confirmer"
	// AnnotationBootstrapHash carries the bootstrap hash on the bootstrap ConfigMap.
	AnnotationBootstrapHash = "gate.intutic.io/bootstrap-hash"
	// FieldManager is the server-side apply field manager of the operator.
	FieldManager = "gate-operator"
)
