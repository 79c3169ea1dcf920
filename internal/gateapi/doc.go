// Package gateapi serves the gate over HTTP from the confirmer binary: POST /v1/guard, the
// harness approvals and workflow needs-approval responders (harness.go, in the wire shapes of
// specs/harness-workflow-wire.md), GET /v1/harness/settings, the Managed Agents webhook
// receiver (webhook.go), /healthz, /readyz and /metrics, and GET /openapi.yaml, the OpenAPI
// 3.1 document of the routes (openapi.yaml, which openapi_test.go holds to the handlers).
// Callers authenticate with a ServiceAccount token checked by TokenReview against an
// allow-list (auth.go); every request is bounded in size and time (limits.go).
//
// It decides nothing itself: every call goes through internal/decisionlog's Recorder, which runs
// the gate and times, counts and records the decision, and a webhook only queues its session on
// confirm's Queue; webhook signatures are verified by internal/anthropic. authtest checks the
// authentication against a real kube-apiserver.
package gateapi
