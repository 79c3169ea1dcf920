// Package controllers holds one reconciler per kind of the gate.intutic.io API. Each is thin:
// it gathers inputs, calls the pure functions of internal/, applies children with server-side
// apply and writes status once.
//
// RBAC markers sit beside the code that needs them; the generated role is
// config/rbac/role.yaml. They grant only the verbs the code uses: reads through the cache
// need list and watch, not get; server-side apply needs patch, and create for a new object.
// The one below is for the Events the reconcilers record (events.k8s.io) on the objects they
// serve. The manager's leader election (its Lease, and the core Events about it) is not
// here: a Role in the manager's own namespace grants it (config/rbac/leader_election_role.yaml),
// so it holds when the manager serves only some namespaces (--namespaces).
//
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
package controllers
