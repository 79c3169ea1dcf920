#!/usr/bin/env bash
# Measures gate-hook start-to-exit wall time on a 100-rule snapshot against a no-op static Go
# binary (median and p99 of 200 interleaved runs each), and reports the binaries' sizes:
# gate-hook as the images ship it (built without CEL, gate-hook-cel beside it for the calls that
# need CEL), gate-hook-cel alone, and gate-client asking the gate-agent sidecar (started on the
# same snapshot, in a kubelet-style volume) with gate-hook as its fall-back.
# Usage: hack/bench-hook.sh [-rules N] [-n RUNS] [-policy FILE] [-checked=false] [-baseline BIN]...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p bin
CGO_ENABLED=0 go build -tags nocel -trimpath -ldflags "-s -w" -o bin/gate-hook ./cmd/gate-hook
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/gate-hook-cel ./cmd/gate-hook
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/noop ./hack/bench-hook/noop
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/gate-client ./cmd/gate-client
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/gate-agent ./cmd/gate-agent
go run ./hack/bench-hook -hook bin/gate-hook -cel bin/gate-hook-cel -noop bin/noop -agent bin/gate-agent -client bin/gate-client "$@"
