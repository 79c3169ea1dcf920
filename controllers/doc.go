// Package controllers holds one reconciler per kind of the gate.intutic.io API. Each is thin:
// it gathers inputs, calls the pure functions of internal/, applies children with server-side
// apply and writes status once.
//
// The RBAC markers below are the permissions the manager needs on its own kinds; the
// generated role is config/rbac/role.yaml.
//
// +kubebuilder:rbac:groups=gate.intutic.io,resources=harnessagentpolicies;sessionconfirmers,verbs=get;list;watch
// +kubebuilder:rbac:groups=gate.intutic.io,resources=harnessagentpolicies/status;sessionconfirmers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
package controllers
