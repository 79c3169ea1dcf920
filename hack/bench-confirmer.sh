#!/usr/bin/env bash
# Confirmer benchmarks against the in-process Sessions API fake (HTTP/2 over TLS): memory per
# watched session and pause-to-confirmation latency for 2,000 sessions (a steady load and a
# burst), /v1/guard throughput; with -replicas N, N confirmers sharing the sessions through a
# Lease on a throwaway API server, one killed and one stopped mid-load. Flags go to
# hack/bench-confirmer (see its -help); -profile DIR also writes the confirmer's profiles.
# Takes about two minutes (-replicas: three, after the control plane is built).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tags=()
for a in "$@"; do
	case "$a" in -profile* | --profile*) tags=(-tags benchpprof) ;; esac
done
CGO_ENABLED=0 go build -trimpath "${tags[@]}" -o bin/confirmer ./cmd/confirmer
go run ./hack/bench-confirmer -confirmer bin/confirmer "$@"
