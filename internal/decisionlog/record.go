package decisionlog

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/intutic/gate-operator/internal/gate"
)

// Schema names the version of a Record; every line of the trail carries it, so a reader tells a
// record from a component's other lines by it. decision-record.schema.json (beside this file, SchemaJSON) is its JSON Schema.
const Schema = "gate.intutic.io/decision/v1"

// Surfaces of records that are not a gate.Call's own.
const (
	// SurfaceHookSidecar: the gate-agent sidecar decided a hook's call for gate-client.
	SurfaceHookSidecar = "hook-sidecar"
	// SurfaceHookFallback: gate-hook decided a call because gate-client could not use the
	// sidecar; the sidecar reports the line gate-hook spooled.
	SurfaceHookFallback = "hook-fallback"
	// SurfaceToolApproval: the outcome of a ToolApproval, a human's answer to an Ask (or its
	// expiry), as the confirmer sent it to the caller.
	SurfaceToolApproval = "tool-approval"
)

// Who vouches for a record (Record.ReportedBy).
const (
	ReportedByGateAgent = "gate-agent"
	// ReportedByHook: a line gate-hook wrote as the agent's own user (Record.Untrusted).
	ReportedByHook      = "hook"
	ReportedByConfirmer = "confirmer"
)

// Enforcement of a record: an Ask or Block recorded and not enforced is "audit" (Would says
// which); every other decision is "enforce".
const (
	EnforcementEnforce = "enforce"
	EnforcementAudit   = "audit"
)

// Record is one decision of the trail, the same shape from every surface: written as one JSON
// line (NDJSON) on the deciding component's stdout by a Writer. It holds the call's input only
// when the deciding policy opted in, and then masked (recordInput); otherwise only its size and
// SHA-256 (of the input as the surface received it).
type Record struct {
	Schema string `json:"schema"`
	// Time is when the decision was made (RFC 3339, UTC, nanoseconds); for a fallback, what
	// gate-hook's line says.
	Time       string `json:"time"`
	DecisionID string `json:"decision_id"`
	Surface    string `json:"surface"`
	// ReportedBy is who vouches for the record; Untrusted marks a line the agent's user wrote.
	ReportedBy string `json:"reported_by"`
	Untrusted  bool   `json:"untrusted,omitempty"`
	// ReportedAt and FallbackReason are set on a fallback's record.
	ReportedAt     string `json:"reported_at,omitempty"`
	FallbackReason string `json:"fallback_reason,omitempty"`
	Runtime        string `json:"runtime,omitempty"`

	// Identity, as the surface knows it: the pod (hook), the ServiceAccount TokenReview
	// authenticated (gate API; Caller is "insecure-no-auth" without authentication), the
	// Managed Agents agent, session and tool use (confirmer). Namespace and Policy are the
	// deciding policy's.
	Namespace      string `json:"namespace,omitempty"`
	Policy         string `json:"policy,omitempty"`
	Pod            string `json:"pod,omitempty"`
	ServiceAccount string `json:"service_account,omitempty"`
	Caller         string `json:"caller,omitempty"`
	Confirmer      string `json:"confirmer,omitempty"`
	Agent          string `json:"agent,omitempty"`
	Session        string `json:"session,omitempty"`
	ToolUseID      string `json:"tool_use_id,omitempty"`

	// Digest is the deciding snapshot's digest (or the layers index's); Layers is every layer's
	// own decision of a layered call, Layer the one that decided.
	Digest        string        `json:"digest,omitempty"`
	VolumeVersion string        `json:"volume_version,omitempty"`
	Layer         string        `json:"layer,omitempty"`
	Layers        []LayerRecord `json:"layers,omitempty"`
	Rule          string        `json:"rule,omitempty"`
	Verdict       string        `json:"verdict"`
	Enforcement   string        `json:"enforcement"`
	Would         *WouldRecord  `json:"would,omitempty"`
	Code          string        `json:"code,omitempty"`
	Reason        string        `json:"reason,omitempty"`
	// Exceptions are the GateExceptions that changed the decision.
	Exceptions []string `json:"exceptions,omitempty"`
	// Approval is the ToolApproval a tool-approval record is the outcome of.
	Approval    *ApprovalRecord `json:"approval,omitempty"`
	Tool        string          `json:"tool,omitempty"`
	InputBytes  int64           `json:"input_bytes"`
	InputSHA256 string          `json:"input_sha256"`
	// Input is the tool input, masked, only when the deciding policy opted in
	// (spec.decisionRecords.input); Erased and Masked are the pointers applied to it, as OPA's
	// decision log names them; InputOmitted says why an opted-in record holds no input.
	Input        json.RawMessage `json:"input,omitempty"`
	Erased       []string        `json:"erased,omitempty"`
	Masked       []string        `json:"masked,omitempty"`
	InputOmitted string          `json:"input_omitted,omitempty"`
	LatencyUS    int64           `json:"latency_us,omitempty"`
	// Nonce is gate-client's request nonce (hook-sidecar).
	Nonce string `json:"nonce,omitempty"`
	// Dropped counts the records this source dropped since the record before this one.
	Dropped *Dropped `json:"dropped,omitempty"`
}

// WouldRecord is the Ask or Block an Audit decision recorded and did not enforce.
type WouldRecord struct {
	Verdict string `json:"verdict"`
	Rule    string `json:"rule,omitempty"`
	Code    string `json:"code,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// LayerRecord is one layer's own decision of a layered call.
type LayerRecord struct {
	Layer      string       `json:"layer"`
	Digest     string       `json:"digest,omitempty"`
	Verdict    string       `json:"verdict"`
	Rule       string       `json:"rule,omitempty"`
	Code       string       `json:"code,omitempty"`
	Would      *WouldRecord `json:"would,omitempty"`
	Exceptions []string     `json:"exceptions,omitempty"`
}

// ApprovalRecord is a ToolApproval's outcome: its name, final state, the Event reason the
// confirmer recorded (Allowed, Denied, Expired, ...), and who answered, when a human did.
type ApprovalRecord struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	Outcome string `json:"outcome"`
	User    string `json:"user,omitempty"`
}

// Dropped counts records a source dropped under its rate limit or a stalled stdout: Allow
// records first, every other record (Ask, Block, a fault, an approval) only when the queue is full.
type Dropped struct {
	Allow int64 `json:"allow,omitempty"`
	Other int64 `json:"other,omitempty"`
}

// Now is the time a record spells: RFC 3339 in UTC with nanoseconds.
func Now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// FromDecision is the record of decision d, made now, of a call whose input arrived as
// rawInput. c is the call as the surface handed it to the gate (its Caller says what the
// surface knows of who called), nil when the call could not be parsed; the surface is c's, or
// "" then. The namespace and policy are the surface's to set.
func FromDecision(d gate.Decision, c *gate.Call, rawInput []byte) Record {
	sum := sha256.Sum256(rawInput)
	rec := Record{
		Schema: Schema, Time: Now(), DecisionID: d.IncidentID,
		Digest: d.SnapshotDigest, Layer: d.Layer, Rule: d.Rule, Verdict: string(d.Verdict), Enforcement: EnforcementOf(d),
		Would: wouldOf(d.Would), Code: d.Code, Reason: d.Reason, Exceptions: d.Exceptions,
		InputBytes: int64(len(rawInput)), InputSHA256: hex.EncodeToString(sum[:]),
	}
	for _, l := range d.Layers {
		rec.Layers = append(rec.Layers, LayerRecord{Layer: l.Layer, Digest: l.SnapshotDigest, Verdict: string(l.Verdict), Rule: l.Rule, Code: l.Code,
			Would: wouldOf(l.Would), Exceptions: l.Exceptions})
	}
	if d.RecordInput != nil {
		recordInput(&rec, toolInput(c, rawInput), d.RecordInput)
	}
	if c != nil {
		rec.Surface, rec.Tool, rec.Session = c.Surface, gate.CanonicalToolName(c.Tool, c.Server), c.Session
		rec.Pod, rec.ServiceAccount, rec.Agent = c.Caller.Pod, c.Caller.ServiceAccount, c.Caller.Agent
	}
	return rec
}

func wouldOf(w *gate.AuditedVerdict) *WouldRecord {
	if w == nil {
		return nil
	}
	return &WouldRecord{Verdict: string(w.Verdict), Rule: w.Rule, Code: w.Code, Reason: w.Reason}
}

// EnforcementOf is a decision's enforcement as records and metrics spell it.
func EnforcementOf(d gate.Decision) string {
	if d.Mode() == gate.Audit {
		return EnforcementAudit
	}
	return EnforcementEnforce
}

// droppable reports whether rec is dropped first: an Allow that audited nothing.
func (rec *Record) droppable() bool {
	return rec.Verdict == string(gate.Allow) && rec.Would == nil && rec.Surface != SurfaceToolApproval
}

// SchemaJSON is the JSON Schema (2020-12) of a Record: decision-record.schema.json.
//
//go:embed decision-record.schema.json
var SchemaJSON []byte
