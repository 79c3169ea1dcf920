#!/usr/bin/env bash
# Confirmer benchmarks against the in-process Sessions API fake: memory per watched session,
# pause-to-confirmation latency for 200 sessions × 5 calls, and /v1/guard throughput.
# Flags go to hack/bench-confirmer (see its -help). Takes about half a minute.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CGO_ENABLED=0 go build -trimpath -o bin/confirmer ./cmd/confirmer
go run ./hack/bench-confirmer -confirmer bin/confirmer "$@"
