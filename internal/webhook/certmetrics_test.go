package webhook

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCertMetrics: the metric is the notAfter of the certificate in the directory at each
// scrape, absent while there is none, and follows a renewal; it is served while the manager runs.
func TestCertMetrics(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	m := &certMetrics{dir: dir, reg: reg}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	// series are the metric's values.
	series := func() []float64 {
		families, err := reg.Gather()
		must(t, err)
		var out []float64
		for _, f := range families {
			if f.GetName() == "gate_operator_webhook_certificate_expiration_timestamp_seconds" {
				for _, m := range f.GetMetric() {
					out = append(out, m.GetGauge().GetValue())
				}
			}
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.reg != nil && !reg.Unregister(m) { // registered once Start has run
		if time.Now().After(deadline) {
			t.Fatal("the metric was never registered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	must(t, reg.Register(m))
	if s := series(); len(s) != 0 {
		t.Fatalf("series %v without a certificate, want none", s)
	}
	for range 2 { // the first certificate, then its renewal
		writeSelfSignedCert(t, dir)
		want := servingCert(dir)
		if want == nil {
			t.Fatal("the written certificate does not parse")
		}
		if s := series(); len(s) != 1 || s[0] != float64(want.NotAfter.Unix()) {
			t.Fatalf("series %v, want the expiry %d", s, want.NotAfter.Unix())
		}
		time.Sleep(time.Second) // the renewal's notAfter is a second later
	}
	must(t, os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("not PEM"), 0o600))
	if s := series(); len(s) != 0 {
		t.Fatalf("series %v with a certificate that does not parse, want none", s)
	}
	cancel()
	must(t, <-done)
	if reg.Unregister(m) {
		t.Error("the metric is still registered after the manager stopped")
	}
}
