package gateagent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/intutic/gate-operator/internal/gate"
)

// RecordSchema names the shape of a Record line.
const RecordSchema = "gate.intutic.io/decision/v1"

// Surfaces and reporters of records.
const (
	// SurfaceSidecar: the sidecar decided the call for gate-client.
	SurfaceSidecar = "hook-sidecar"
	// SurfaceFallback: gate-hook decided the call because gate-client could not use the
	// sidecar; the sidecar reports the spool's line.
	SurfaceFallback   = "hook-fallback"
	reportedBySidecar = "gate-agent"
	reportedByHook    = "hook"
)

// Record is one line of the sidecar's decision trail, written as JSON to its stdout. It never
// holds the call's input, only its size and SHA-256 (of the hook input as the runtime wrote it).
//
// It is not internal/decisionlog's Record: that one is the confirmer's, written as logr key
// values with no time, pod, volume version, latency or nonce, and built by an unexported
// function from a gate.Call whose input was already rendered. The fields here that both have
// carry the same values.
type Record struct {
	Schema string `json:"schema"`
	// Time is when the decision was made: for a fallback, what gate-hook's line says.
	Time       string `json:"time"`
	DecisionID string `json:"decision_id"`
	Surface    string `json:"surface"`
	// ReportedBy is who vouches for the record: "gate-agent", or "hook" for a fallback spool
	// line, which the agent's user wrote (Untrusted).
	ReportedBy string `json:"reported_by"`
	Untrusted  bool   `json:"untrusted,omitempty"`
	// ReportedAt and FallbackReason are set on a fallback's record.
	ReportedAt     string `json:"reported_at,omitempty"`
	FallbackReason string `json:"fallback_reason,omitempty"`
	Runtime        string `json:"runtime,omitempty"`
	Pod            string `json:"pod,omitempty"`
	Namespace      string `json:"namespace,omitempty"`
	// Digest is the deciding snapshot's digest (gate.Decision.SnapshotDigest).
	Digest        string `json:"digest,omitempty"`
	VolumeVersion string `json:"volume_version,omitempty"`
	Layer         string `json:"layer,omitempty"`
	Rule          string `json:"rule,omitempty"`
	Verdict       string `json:"verdict"`
	// Enforcement is "audit" when an Ask or Block was recorded and not enforced (Would), else
	// "enforce".
	Enforcement string       `json:"enforcement"`
	Would       *WouldRecord `json:"would,omitempty"`
	Code        string       `json:"code,omitempty"`
	Reason      string       `json:"reason,omitempty"`
	Exceptions  []string     `json:"exceptions,omitempty"`
	Tool        string       `json:"tool,omitempty"`
	Session     string       `json:"session,omitempty"`
	InputBytes  int          `json:"input_bytes"`
	InputSHA256 string       `json:"input_sha256"`
	LatencyUS   int64        `json:"latency_us,omitempty"`
	Nonce       string       `json:"nonce,omitempty"`
}

// WouldRecord is the Ask or Block an Audit decision recorded and did not enforce.
type WouldRecord struct {
	Verdict string `json:"verdict"`
	Rule    string `json:"rule,omitempty"`
	Code    string `json:"code,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// decisionRecord is the record of decision d of a call whose hook input was input.
func decisionRecord(d gate.Decision, input []byte) Record {
	sum := sha256.Sum256(input)
	rec := Record{
		Schema: RecordSchema, Time: time.Now().UTC().Format(time.RFC3339Nano), DecisionID: d.IncidentID,
		Surface: SurfaceSidecar, ReportedBy: reportedBySidecar,
		Digest: d.SnapshotDigest, Layer: d.Layer, Rule: d.Rule, Verdict: string(d.Verdict), Enforcement: modeOf(d),
		Code: d.Code, Reason: d.Reason, Exceptions: d.Exceptions,
		InputBytes: len(input), InputSHA256: hex.EncodeToString(sum[:]),
	}
	if w := d.Would; w != nil {
		rec.Would = &WouldRecord{Verdict: string(w.Verdict), Rule: w.Rule, Code: w.Code, Reason: w.Reason}
	}
	return rec
}

// modeOf is a decision's mode as records and metrics spell it.
func modeOf(d gate.Decision) string {
	if d.Mode() == gate.Audit {
		return "audit"
	}
	return "enforce"
}

// recordWriter writes records to one writer, a whole line per Write, one at a time. A slow
// writer slows the callers down (each writes after its answer is out) rather than losing
// records or queueing them without bound.
type recordWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (rw *recordWriter) write(rec *Record) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	rw.mu.Lock()
	defer rw.mu.Unlock()
	_, err = rw.w.Write(line)
	return err
}
