// Package confirm answers the tool confirmations of Anthropic Managed Agents sessions through
// the gate, and holds what every surface of the confirmer binary shares:
//
//   - the Confirmer (confirmer.go): which tool uses are pending, answering each exactly once,
//     Ask verdicts held for a human until their deadline;
//   - the loops that trigger it: the Watcher (watch.go: discover, stream, reconnect, poll)
//     and the Queue of sessions named by webhooks (queue.go);
//   - the Shard (shard.go): this replica's part of the sessions when replicas share them, by
//     rendezvous hashing over the live members, which internal/confirm/membership keeps in a
//     Lease;
//   - the Managed Agents side of the human lane (approvalcalls.go): a held call's answer,
//     read from its ToolApproval (internal/approvals keeps those), sent to the session once,
//     Expired at the deadline, AnsweredInRuntime when the runtime's console answered first;
//   - the Reloader (reload.go), which keeps the gate on the mounted policy snapshot;
//   - the Prometheus metrics of confirmations, reloads and approvals (metrics.go).
//
// Its decisions are timed, counted and recorded by internal/decisionlog's Recorder, as the gate
// HTTP API's are. It speaks to the Sessions API only through internal/anthropic, and serves
// nothing over HTTP: the gate HTTP API and the webhook receiver are internal/gateapi, which
// imports this package. cmd/confirmer wires the two.
package confirm
