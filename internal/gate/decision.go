// Package gate is the one decision engine behind every surface of gate-operator: the Claude
// Code hook, the harness and workflow responders, and the Managed Agents confirmer. It compiles
// the rules of a policy snapshot with CEL and decides one tool call at a time.
//
// The package imports no Kubernetes package, so the gate-hook binary stays small and starts fast.
package gate

import "github.com/intutic/gate-operator/internal/gate/toolname"

// Verdict is the outcome of a decision.
type Verdict string

const (
	// Allow lets the call proceed; the agent's own permission flow still applies.
	Allow Verdict = "Allow"
	// Ask holds the call for a human.
	Ask Verdict = "Ask"
	// Block refuses the call.
	Block Verdict = "Block"
)

// rank orders verdicts by restrictiveness: Block > Ask > Allow.
func (v Verdict) rank() int {
	switch v {
	case Block:
		return 2
	case Ask:
		return 1
	default:
		return 0
	}
}

// FailurePolicy says what a rule whose evaluation errors does.
type FailurePolicy string

const (
	// Fail blocks the call when a rule errors.
	Fail FailurePolicy = "Fail"
	// Ignore skips a rule that errors.
	Ignore FailurePolicy = "Ignore"
)

// Surfaces a call can arrive on.
const (
	SurfaceHook          = "hook"
	SurfaceHarness       = "harness"
	SurfaceWorkflow      = "workflow"
	SurfaceManagedAgents = "managed-agents"
	SurfaceAPI           = "api"
)

// Codes of the decisions the gate makes on its own, rather than from a rule.
const (
	// CodeSnapshotMissing: no snapshot was loaded, or the file is absent or empty.
	CodeSnapshotMissing = "snapshot_missing"
	// CodeSnapshotCorrupt: the snapshot is not a readable PolicySnapshot.
	CodeSnapshotCorrupt = "snapshot_corrupt"
	// CodeSnapshotUnverified: the digest does not match, or the snapshot is for another workspace.
	CodeSnapshotUnverified = "snapshot_unverified"
	// CodeGateCrashed: evaluation panicked.
	CodeGateCrashed = "gate_crashed"
	// CodeToolMismatch: a policy compiled for one tool (CompileFor) was asked about another.
	CodeToolMismatch = "tool_mismatch"
	// CodePolicyInvalid: the policy has never compiled, so its snapshot blocks every call.
	CodePolicyInvalid = "policy_invalid"
	// CodeRuleError: a rule's expression failed to compile or evaluate under failurePolicy Fail.
	CodeRuleError = "rule_error"
	// CodeInputInvalid: the call itself could not be read: malformed or oversized hook input, a
	// tool input that does not decode (see RenderInput), or an MCP server that contradicts the
	// tool name (see toolname.Resolve).
	CodeInputInvalid = "input_invalid"
	// CodeInputTooCostly: a rule could not judge the input within the cost limit. The call is
	// refused under either failurePolicy: the rule is not broken, the input is too large for it.
	CodeInputTooCostly = "input_too_costly"
	// CodeDefaultAction: no rule matched and the policy's defaultAction is Ask or Block.
	CodeDefaultAction = "default_action"
	// CodeNoPolicy: the pod's bundle is layered (LayersIndex) and no layer applies to it: no
	// cluster policy selects the pod and the namespace has no policy of its own.
	CodeNoPolicy = "no_policy"
)

// RefusalPrefix starts every refusal message; byte-compatible with the TypeScript SDK.
const RefusalPrefix = "[Intutic Governance] BLOCKED: "

// Call is one tool call to decide.
type Call struct {
	// Tool is the tool name as the runtime reports it. MCP tools are mcp__<server>__<tool>,
	// or the bare tool name with Server set.
	Tool string
	// Server is the MCP server name, when the runtime reports it separately.
	Server string
	// Input is the rendered tool input (see RenderInput).
	Input map[string]any
	// Surface is where the call arrived: hook, harness, workflow, managed-agents or api.
	Surface string
	// Session is the agent session ID, when known.
	Session string
	// Cwd is the agent's working directory, when the runtime reports it (the hook's cwd);
	// relative paths in the call's view (CallView) are resolved against it.
	Cwd string
	// Caller is who makes the call, as far as the surface can tell (see Caller): the surface
	// fills ServiceAccount, Pod and Agent where it knows them; the gate fills the rest.
	Caller Caller
}

// CanonicalToolName is the name a call's tool is decided under (toolname.Canonical): for logs,
// audit records and the names of objects about the call.
func CanonicalToolName(tool, server string) string { return toolname.Canonical(tool, server) }

// Decision is the gate's answer to one call.
type Decision struct {
	Verdict Verdict `json:"verdict"`
	// Rule is the name of the rule that decided, empty for defaultAction and the gate's own refusals.
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason"`
	Code   string `json:"code,omitempty"`
	// IncidentID is unique and sorts by time.
	IncidentID string `json:"incidentId"`
	// Message is the refusal message of a Block: RefusalPrefix + Reason.
	Message string `json:"message,omitempty"`
	// SnapshotDigest is the digest of the snapshot that decided, empty when none was in force.
	SnapshotDigest string `json:"snapshotDigest,omitempty"`
	// Would is set when a rule in Audit (or an Audit policy's defaultAction) judged the call
	// more restrictively than Verdict: the Ask or Block the gate recorded and did not enforce.
	// Verdict, Rule, Reason, Code and Message are always the decision in effect.
	Would *AuditedVerdict `json:"would,omitempty"`
	// Exceptions are the GateExceptions that changed this decision: without them its layer
	// would have decided otherwise (see LayeredPolicy). Only layered decisions carry them.
	Exceptions []string `json:"exceptions,omitempty"`
	// Layer is the layer that decided, when the call was decided by layered policies
	// (LayeredPolicy): "ClusterHarnessAgentPolicy/<name>" or "HarnessAgentPolicy/<ns>/<name>".
	// Empty for a decision of one policy, so such a decision serialises as it always has.
	Layer string `json:"layer,omitempty"`
	// Layers is every layer's own decision of a layered call, in the order they are combined
	// (see Combine).
	Layers []LayerVerdict `json:"layers,omitempty"`
	// RecordInput is the deciding policy's opt-in to a record holding the input, masked (every
	// layer's, merged, for a layered call); nil, the record holds its size and SHA-256 only. It
	// is for the record's writer: no answer to a caller carries it.
	RecordInput *InputRecording `json:"-"`
}

// LayerVerdict is one layer's own decision of a call that layered policies decided.
type LayerVerdict struct {
	// Layer identifies the layer, as Decision.Layer does.
	Layer          string          `json:"layer"`
	Verdict        Verdict         `json:"verdict"`
	Rule           string          `json:"rule,omitempty"`
	Code           string          `json:"code,omitempty"`
	SnapshotDigest string          `json:"snapshotDigest,omitempty"`
	Would          *AuditedVerdict `json:"would,omitempty"`
	// Exceptions are the GateExceptions that changed this layer's decision.
	Exceptions []string `json:"exceptions,omitempty"`
}

// AuditedVerdict is a verdict recorded and not enforced (see Audit): what the gate would have
// answered had every rule, and the defaultAction, been enforced.
type AuditedVerdict struct {
	// Verdict is Ask or Block.
	Verdict Verdict `json:"verdict"`
	// Rule is the rule that would have decided, empty for the defaultAction.
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason"`
	Code   string `json:"code,omitempty"`
}

// AuditPrefix starts the note a surface gives of a verdict recorded and not enforced.
const AuditPrefix = "[Intutic Governance] AUDIT: "

// Mode is Audit when the decision let through an Ask or Block it recorded (Would is set), and
// Enforce otherwise: every decision of an Enforce policy, every fault, and every call that
// nothing in Audit would have held.
func (d Decision) Mode() Enforcement {
	if d.Would != nil {
		return Audit
	}
	return Enforce
}

// AuditNote says what was recorded and not enforced, as "[Intutic Governance] AUDIT: would
// block: <reason>" (or "would ask"); empty when nothing was.
func (d Decision) AuditNote() string {
	if d.Would == nil {
		return ""
	}
	verb := "would ask: "
	if d.Would.Verdict == Block {
		verb = "would block: "
	}
	return AuditPrefix + verb + d.Would.Reason
}

// Refuse is the Block a surface answers with when it cannot put a call to the gate at all (its
// input does not decode, say): no rule decided it and no snapshot was consulted.
func Refuse(code, reason string) Decision {
	return refusal(code, reason, "")
}

// refusal builds a Block decision that no rule made.
func refusal(code, reason, digest string) Decision {
	return Decision{
		Verdict:        Block,
		Reason:         reason,
		Code:           code,
		IncidentID:     NewIncidentID(),
		Message:        RefusalPrefix + reason,
		SnapshotDigest: digest,
	}
}
