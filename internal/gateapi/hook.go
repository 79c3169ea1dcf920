package gateapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/approvals"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/claudecode"
)

// The human lane of the hook surface (docs/gate-agent.md, "A human lane"). A sandbox pod's
// gate-agent sidecar, which decided a Claude Code call Ask under its pod's policy, asks for the
// call's ToolApproval: the first request creates it, every later one for the same call (the
// resumed session runs the hook again) reads its state. The sidecar answers the hook from it:
// Pending is "defer", Approved an allow, anything else a deny.
//
// The confirmer does not decide the call again: the sidecar holds the pod's whole bundle (its
// cluster layers, its pod labels), which the confirmer does not. It trusts the decision because
// of who sends it: a token bound to a pod of this namespace, with this confirmer's audience,
// that only the pod's sidecar mounts (the pod webhook mounts it nowhere else). The approval
// binds that pod (its UID is in the approval's name), the session, the tool-use id, the tool,
// the input's digest, and the rule, reason and snapshot digest the sidecar decided with; a
// request that differs in any of them does not find an approval it can use.

// CodeHookPolicyMismatch is the code of a hook approval asked for a policy this confirmer does
// not hold the approvals of.
const CodeHookPolicyMismatch = "policy_mismatch"

// hookApprovalRequest is POST /v1/hook/approvals.
type hookApprovalRequest struct {
	// Runtime is the hook's runtime; only claude-code has a way to hold a call ("defer").
	Runtime string `json:"runtime"`
	// Input is the hook input as the runtime sent it.
	Input json.RawMessage `json:"input"`
	// Policy is the namespace/name of the pod's policy, the one the approvers answer for.
	Policy   string       `json:"policy"`
	Decision hookDecision `json:"decision"`
}

// hookDecision is the sidecar's decision of the call: an Ask.
type hookDecision struct {
	Verdict        gate.Verdict `json:"verdict"`
	Rule           string       `json:"rule,omitempty"`
	Reason         string       `json:"reason"`
	Layer          string       `json:"layer,omitempty"`
	SnapshotDigest string       `json:"snapshotDigest"`
	IncidentID     string       `json:"incidentId"`
}

// hookApproval answers POST /v1/hook/approvals with the call's approval as GET
// /v1/approvals/{name} answers it, creating it first when it does not exist.
func (a *API) hookApproval(w http.ResponseWriter, r *http.Request, caller Caller) {
	create, err := a.wantsApprovals(r)
	switch {
	case err != nil:
		badRequest(w, err)
		return
	case !create:
		badRequest(w, errors.New("a hook approval is asked for with "+HeaderHumanApproval+": "+humanApprovalCreate))
		return
	}
	if caller.PodUID == "" {
		writeError(w, http.StatusForbidden, "a hook approval needs a ServiceAccount token bound to its pod (a projected token, which only the pod's gate-agent sidecar mounts)")
		return
	}
	if ns, _, _ := strings.Cut(caller.ServiceAccount, "/"); ns != a.Approvals.Namespace {
		writeError(w, http.StatusForbidden, "a hook approval is for the pods of the confirmer's namespace "+a.Approvals.Namespace)
		return
	}
	var req hookApprovalRequest
	if err := decodeStrict(r, &req); err != nil {
		badRequest(w, err)
		return
	}
	if req.Runtime != claudecode.Name {
		badRequest(w, errors.New("runtime: only "+claudecode.Name+" can hold a call for a human"))
		return
	}
	call, in, err := claudecode.ParseHookInput(req.Input)
	switch {
	case err != nil:
		badRequest(w, errors.New("input: "+err.Error()))
		return
	case in.SessionID == "" || in.ToolUseID == "":
		badRequest(w, errors.New("input: a held call needs its session_id and tool_use_id"))
		return
	case req.Decision.Verdict != gate.Ask:
		badRequest(w, errors.New("decision.verdict: only an Ask is held for a human"))
		return
	case req.Decision.SnapshotDigest == "" || req.Decision.IncidentID == "":
		badRequest(w, errors.New("decision: snapshotDigest and incidentId are required"))
		return
	case req.Policy != a.Approvals.Namespace+"/"+a.Approvals.Policy:
		writeConflict(w, gate.RefusalPrefix+"this confirmer holds the approvals of "+
			a.Approvals.Namespace+"/"+a.Approvals.Policy+", not of the pod's policy "+req.Policy+": the call is not held", CodeHookPolicyMismatch)
		return
	}
	d := gate.Decision{Verdict: gate.Ask, Rule: req.Decision.Rule, Reason: req.Decision.Reason, Layer: req.Decision.Layer,
		SnapshotDigest: req.Decision.SnapshotDigest, IncidentID: req.Decision.IncidentID}
	ta, err := a.createApproval(r.Context(), approvals.Request{
		Surface: gatev1.SurfaceHook, Session: in.SessionID, ToolUseID: in.ToolUseID, Tool: gate.CanonicalToolName(call.Tool, call.Server),
		Decision: d, RawInput: in.ToolInput, Pod: &gatev1.ToolApprovalPod{Name: caller.PodName, UID: caller.PodUID},
	})
	switch {
	case errors.Is(err, approvals.ErrNotTrusted):
		writeConflict(w, notTrustedMessage(err), CodeApprovalNotTrusted)
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "the ToolApproval could not be created or read; retry")
		return
	}
	writeJSONStatus(w, http.StatusOK, a.answerOf(r, ta))
}
