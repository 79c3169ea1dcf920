//go:build benchpprof

package main

// Built only with -tags benchpprof (hack/bench-confirmer.sh -profile): the runtime profiles on
// the loopback address in $CONFIRMER_PPROF, for finding where a benchmark's time and memory go.

import (
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof on http.DefaultServeMux
	"os"
)

func init() {
	if addr := os.Getenv("CONFIRMER_PPROF"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
