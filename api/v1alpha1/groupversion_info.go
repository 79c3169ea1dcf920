// Package v1alpha1 contains the gate.intutic.io/v1alpha1 API: HarnessAgentPolicy, which
// declares the rules, permission posture and egress of sandboxed AI coding agents, and
// SessionConfirmer, which runs the confirmer that answers Managed Agents tool confirmations.
//
// +kubebuilder:object:generate=true
// +groupName=gate.intutic.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "gate.intutic.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this API with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this API to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
