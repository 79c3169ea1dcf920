package gateagent

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/gateagent/gateagenttest"
)

// BenchmarkSocketDecision is one call put to the sidecar over its socket, as gate-client puts
// it (a connection, the request, the answer), by 1 and by 50 callers at once; it reports the
// median and 99th percentile of a call's time.
func BenchmarkSocketDecision(b *testing.B) {
	files, _ := generation(b, 1)
	vol := gateagenttest.NewVolume(b, files)
	r := start(b, Options{BundleDir: vol.Dir})
	for _, callers := range []int{1, 50} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			var next atomic.Int64
			var mu sync.Mutex
			took := make([]time.Duration, 0, b.N)
			var wg sync.WaitGroup
			b.ResetTimer()
			for c := range callers {
				wg.Go(func() {
					mine := make([]time.Duration, 0, b.N/callers+1)
					defer func() {
						mu.Lock()
						took = append(took, mine...)
						mu.Unlock()
					}()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						begin := time.Now()
						resp, err := gateagenttest.Ask(r.socket, agentproto.Request{Nonce: gateagenttest.Nonce(c<<32 | int(i)), Runtime: agentproto.RuntimeClaudeCode, Version: vol.Version(), Input: rm})
						if err != nil || resp.Exit != 2 {
							b.Errorf("call %d: %+v, %v", i, resp, err)
							return
						}
						mine = append(mine, time.Since(begin))
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(took)
			if len(took) > 0 {
				b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(took[(len(took)*99+99)/100-1].Microseconds()), "p99-µs")
			}
		})
	}
}
