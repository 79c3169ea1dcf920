// Package confirm talks to the Anthropic Managed Agents Sessions API and answers the tool
// confirmations of its sessions through the gate. This file set holds the wire layer: the
// HTTP client with the SDK's headers, query encoding, pagination and retry policy, the SSE
// reader, and the Standard Webhooks verifier, each exactly as specs/managed-agents-wire.md
// describes.
package confirm
