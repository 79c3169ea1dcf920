// Package controllers holds one reconciler per kind of the gate.intutic.io API. Each is thin:
// it gathers inputs, calls the pure functions of internal/, applies children with server-side
// apply and writes status once.
//
// RBAC markers sit beside the code that needs them; the generated role is
// config/rbac/role.yaml. The ones below are the manager's own: events and, with
// --leader-elect, its lease.
//
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update
package controllers
