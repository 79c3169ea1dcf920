package decisionlog_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/decisionlog/decisionlogtest"
	"github.com/intutic/gate-operator/internal/testutil"
)

func record(verdict string) decisionlog.Record {
	return decisionlog.Record{Schema: decisionlog.Schema, Time: decisionlog.Now(), DecisionID: "inc", Surface: "harness", ReportedBy: "confirmer",
		Verdict: verdict, Enforcement: "enforce"}
}

// TestWriterRateLimitsAllowRecords: past the rate limit, Allow records are dropped and every
// other record is written; the next record written says how many were dropped, and so does
// the metric.
func TestWriterRateLimitsAllowRecords(t *testing.T) {
	var out testutil.SyncBuffer
	reg := prometheus.NewRegistry()
	w := decisionlog.NewWriter(&out, decisionlog.WriterOptions{AllowRate: 1e-9, AllowBurst: 2, Registerer: reg})
	for range 10 {
		w.Write(record("Allow"))
	}
	audited := record("Allow")
	audited.Enforcement, audited.Would = "audit", &decisionlog.WouldRecord{Verdict: "Block"}
	w.Write(audited) // an audited Allow is a would-block: never dropped first
	for range 5 {
		w.Write(record("Block"))
	}
	w.Close()
	recs := decisionlogtest.ValidateLines(t, out.String())
	var verdicts []string
	for _, r := range recs {
		verdicts = append(verdicts, r.Verdict+"/"+r.Enforcement)
	}
	if want := "Allow/enforce Allow/enforce Allow/audit Block/enforce Block/enforce Block/enforce Block/enforce Block/enforce"; strings.Join(verdicts, " ") != want {
		t.Fatalf("records %q, want %q", strings.Join(verdicts, " "), want)
	}
	// The drops are reported on the records written after them, each once.
	var reported decisionlog.Dropped
	for _, r := range recs {
		if r.Dropped != nil {
			reported.Allow += r.Dropped.Allow
			reported.Other += r.Dropped.Other
		}
	}
	if reported.Allow != 8 || reported.Other != 0 {
		t.Fatalf("reported dropped %+v, want 8 Allow", reported)
	}
	if got := dropped(t, reg); got != "allow=8 other=0" {
		t.Fatalf("gate_decision_records_dropped_total %s", got)
	}
}

// blocked is an output that takes nothing until released, as a stalled log pipeline. entered
// holds one signal that a Write began: it is buffered, so the signal waits for a test that is
// not yet receiving (unbuffered, a Write that came first found no receiver, and the test then
// waited for it for ever).
type blocked struct {
	entered, release chan struct{}
	testutil.SyncBuffer
}

func (b *blocked) Write(p []byte) (int, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return b.SyncBuffer.Write(p)
}

// TestWriterNeverBlocksTheDecider: with the output stalled, Write returns at once; Allow
// records stop at half the queue, the others fill it, and the rest are dropped and counted,
// each class in its own count, reported when the output takes lines again.
func TestWriterNeverBlocksTheDecider(t *testing.T) {
	out := &blocked{entered: make(chan struct{}, 1), release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	w := decisionlog.NewWriter(out, decisionlog.WriterOptions{AllowRate: 1e9, AllowBurst: 1e9, Queue: 8, Registerer: reg})
	// One record is taken off the queue by the writer's goroutine and waits in Write.
	w.Write(record("Block"))
	<-out.entered
	for range 100 {
		w.Write(record("Allow"))
	}
	for range 100 {
		w.Write(record("Ask"))
	}
	close(out.release)
	w.Close()
	recs := decisionlogtest.ValidateLines(t, out.String())
	counts := map[string]int{}
	var reported decisionlog.Dropped
	for _, r := range recs {
		counts[r.Verdict]++
		if r.Dropped != nil {
			reported.Allow += r.Dropped.Allow
			reported.Other += r.Dropped.Other
		}
	}
	// 1 Block in flight; the queue of 8 holds 4 Allow (half) and then 4 Ask.
	if counts["Block"] != 1 || counts["Allow"] != 4 || counts["Ask"] != 4 {
		t.Fatalf("written %v, want 1 Block, 4 Allow and 4 Ask", counts)
	}
	if reported.Allow != 96 || reported.Other != 96 {
		t.Fatalf("reported dropped %+v, want 96 Allow and 96 other", reported)
	}
	if got := dropped(t, reg); got != "allow=96 other=96" {
		t.Fatalf("gate_decision_records_dropped_total %s", got)
	}
}

// TestNilWriter: a nil Writer drops every record and Close does nothing.
func TestNilWriter(t *testing.T) {
	var w *decisionlog.Writer
	w.Write(record("Block"))
	w.Close()
	decisionlog.NewWriter(io.Discard, decisionlog.WriterOptions{}).Close()
}

// dropped is gate_decision_records_dropped_total as "allow=N other=M".
func dropped(t *testing.T, reg prometheus.Gatherer) string {
	t.Helper()
	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != "gate_decision_records_dropped_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return fmt.Sprintf("allow=%v other=%v", got["allow"], got["other"])
}

// TestWriteAfterClose: a record written after Close (a request a shutdown timed out on) is
// counted dropped, not a panic; Close and Flush may be called again.
func TestWriteAfterClose(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := decisionlog.NewWriter(io.Discard, decisionlog.WriterOptions{Registerer: reg})
	w.Close()
	w.Write(record("Block"))
	w.Flush()
	w.Close()
	if got := dropped(t, reg); got != "allow=0 other=1" {
		t.Fatalf("gate_decision_records_dropped_total %s", got)
	}
}
