// Package v1alpha1 contains the gate.intutic.io/v1alpha1 API: HarnessAgentPolicy, which
// declares the rules, permission posture and egress of sandboxed AI coding agents, and
// SessionConfirmer, which runs the confirmer that answers Managed Agents tool confirmations.
//
// +kubebuilder:object:generate=true
// +groupName=gate.intutic.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "gate.intutic.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this API with a runtime.Scheme.
	// It is apimachinery's builder rather than controller-runtime's (deprecated), so importing
	// this API does not pull in controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this API to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers every kind of this API, and the meta types of its group version.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&HarnessAgentPolicy{}, &HarnessAgentPolicyList{},
		&ClusterHarnessAgentPolicy{}, &ClusterHarnessAgentPolicyList{},
		&GateException{}, &GateExceptionList{},
		&SessionConfirmer{}, &SessionConfirmerList{},
		&ToolApproval{}, &ToolApprovalList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
