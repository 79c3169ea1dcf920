// Package anthropic is the wire layer of the Anthropic Managed Agents Sessions API, exactly as
// specs/managed-agents-wire.md describes it: the HTTP client with the SDK's headers, query
// encoding, PageCursor pagination and retry policy (client.go, query.go, retry.go), the
// sessions and events types and calls (sessions.go), the agent object and the permission
// policy each of its tools runs under (agents.go), the SSE reader of event streams (sse.go),
// the API's errors (errors.go), and the Standard Webhooks verifier (webhook.go).
//
// It does not decide anything: which tool uses are pending and how they are answered is
// internal/confirm's, and serving HTTP is internal/gateapi's. It imports neither, nor the
// gate. anthropictest is an in-process fake of the API for tests, the demo and benchmarks.
package anthropic
