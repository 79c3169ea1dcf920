package gateapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/approvals"
	"github.com/intutic/gate-operator/internal/gate"
)

// The harness and workflow responders (specs/harness-workflow-wire.md §1.6-1.8, §2, §3).

// pendingApproval is one approval to decide, in either form the harness produces: a
// tool-approval-request stream part (toolCall.input is an object) or a suspended-session row
// HarnessV1PendingToolApproval (input is the raw JSON text).
type pendingApproval struct {
	// Stream part.
	Type       string    `json:"type,omitempty"`
	ApprovalID string    `json:"approvalId"`
	ToolCall   *toolCall `json:"toolCall,omitempty"`
	// isAutomatic, reason and signature may ride along on a stream part; they do not change
	// the decision.
	IsAuto    *bool   `json:"isAutomatic,omitempty"`
	Reason    *string `json:"reason,omitempty"`
	Signature *string `json:"signature,omitempty"`

	// Suspended-session row.
	ToolCallID       string          `json:"toolCallId,omitempty"`
	ToolName         string          `json:"toolName,omitempty"`
	Input            json.RawMessage `json:"input,omitempty"`
	Kind             string          `json:"kind,omitempty"`
	ProviderExecuted *bool           `json:"providerExecuted,omitempty"`
	NativeName       string          `json:"nativeName,omitempty"`
}

type toolCall struct {
	Type             string          `json:"type"`
	ToolCallID       string          `json:"toolCallId"`
	ToolName         string          `json:"toolName"`
	Input            json.RawMessage `json:"input"`
	ProviderExecuted *bool           `json:"providerExecuted,omitempty"`
}

// toolApprovalResponse is provider-utils' ToolApprovalResponse.
type toolApprovalResponse struct {
	Type             string `json:"type"`
	ApprovalID       string `json:"approvalId"`
	Approved         bool   `json:"approved"`
	Reason           string `json:"reason,omitempty"`
	ProviderExecuted *bool  `json:"providerExecuted,omitempty"`
}

// continuation is the dual shape: a ToolApprovalResponse at the top level (what harness
// 1.0.122 takes) plus approvalResponse and toolCall (what 1.0.40 took).
type continuation struct {
	toolApprovalResponse
	ApprovalResponse toolApprovalResponse `json:"approvalResponse"`
	ToolCall         toolCall             `json:"toolCall"`
	IncidentID       string               `json:"incidentId"`
	// Would is the Ask or Block recorded and not enforced (Audit), when there is one.
	Would *gate.AuditedVerdict `json:"would,omitempty"`
}

type heldApproval struct {
	ApprovalID string               `json:"approvalId"`
	ToolCallID string               `json:"toolCallId"`
	ToolName   string               `json:"toolName"`
	Reason     string               `json:"reason"`
	IncidentID string               `json:"incidentId"`
	Would      *gate.AuditedVerdict `json:"would,omitempty"`
	// ApprovalName is the call's ToolApproval, present only when the request opted in
	// (Gate-Human-Approval: create).
	ApprovalName string `json:"approvalName,omitempty"`
}

type approvalsRequest struct {
	PendingApprovals []pendingApproval `json:"pendingApprovals"`
	Session          string            `json:"session,omitempty"`
}

type approvalsResponse struct {
	ToolApprovalContinuations []continuation `json:"toolApprovalContinuations"`
	// Pending are the Ask verdicts: they wait for a human and have no continuation.
	Pending []heldApproval `json:"pending"`
}

// normalize returns the tool call of a pending approval in one form.
func (p *pendingApproval) normalize() (toolCall, error) {
	if p.ApprovalID == "" {
		return toolCall{}, errors.New("approvalId is required")
	}
	if p.ToolCall != nil {
		if p.Type != "" && p.Type != "tool-approval-request" {
			return toolCall{}, fmt.Errorf("type %q is not tool-approval-request", p.Type)
		}
		tc := *p.ToolCall
		if tc.ToolName == "" || tc.ToolCallID == "" {
			return toolCall{}, errors.New("toolCall needs toolCallId and toolName")
		}
		tc.Type = "tool-call"
		return tc, nil
	}
	if p.ToolName == "" || p.ToolCallID == "" {
		return toolCall{}, errors.New("a pending row needs toolCallId and toolName")
	}
	input := p.Input
	var s string
	if json.Unmarshal(p.Input, &s) == nil {
		input = json.RawMessage(s) // the row carries the input as raw JSON text
		if !json.Valid(input) {
			b, _ := json.Marshal(s)
			input = b
		}
	}
	pe := p.ProviderExecuted
	if pe == nil {
		v := p.Kind != "custom" // built-in rows are provider-executed unless they say otherwise
		pe = &v
	}
	return toolCall{Type: "tool-call", ToolCallID: p.ToolCallID, ToolName: p.ToolName, Input: input, ProviderExecuted: pe}, nil
}

func (a *API) harnessApprovals(w http.ResponseWriter, r *http.Request, caller Caller) {
	var req approvalsRequest
	if err := decodeStrict(r, &req); err != nil {
		badRequest(w, err)
		return
	}
	if err := uniqueApprovalIDs(req.PendingApprovals); err != nil {
		badRequest(w, err)
		return
	}
	create, err := a.wantsApprovals(r)
	if err != nil {
		badRequest(w, err)
		return
	}
	resp := approvalsResponse{ToolApprovalContinuations: []continuation{}, Pending: []heldApproval{}}
	for i, p := range req.PendingApprovals {
		tc, err := p.normalize()
		if err != nil {
			badRequest(w, fmt.Errorf("pendingApprovals[%d]: %w", i, err))
			return
		}
		// Input that does not decode as the harness decoded it is refused, never approved.
		call := &gate.Call{Tool: tc.ToolName, Surface: gate.SurfaceHarness, Session: req.Session}
		d := publicDecision(a.Decisions.EvaluateRaw(a.Gate, identify(call, caller), tc.Input, caller.origin()))
		if d.Verdict == gate.Ask {
			held := heldApproval{ApprovalID: p.ApprovalID, ToolCallID: tc.ToolCallID, ToolName: tc.ToolName, Reason: d.Reason, IncidentID: d.IncidentID, Would: d.Would}
			if create {
				// Without its ToolApproval a human could never answer the call: the request fails, and is retried.
				ta, err := a.createApproval(r.Context(), approvals.Request{Surface: gatev1.SurfaceHarness, Session: req.Session, ToolUseID: p.ApprovalID, Tool: tc.ToolName, Decision: d, RawInput: tc.Input})
				if errors.Is(err, approvals.ErrNotTrusted) {
					writeConflict(w, "pendingApprovals["+strconv.Itoa(i)+"]: "+notTrustedMessage(err), CodeApprovalNotTrusted)
					return
				} else if err != nil {
					writeError(w, http.StatusServiceUnavailable, "the ToolApproval of pendingApprovals["+strconv.Itoa(i)+"] could not be created; retry")
					return
				}
				held.ApprovalName = ta.Name
			}
			resp.Pending = append(resp.Pending, held)
			continue
		}
		tar := toolApprovalResponse{Type: "tool-approval-response", ApprovalID: p.ApprovalID, Approved: d.Verdict == gate.Allow, ProviderExecuted: tc.ProviderExecuted}
		switch {
		case d.Verdict == gate.Block:
			tar.Reason = d.Message
		case d.Would != nil:
			// An approval's reason only stays in the history: it records the audited verdict.
			tar.Reason = d.AuditNote()
		default:
			tar.Reason = d.Reason
		}
		resp.ToolApprovalContinuations = append(resp.ToolApprovalContinuations, continuation{
			toolApprovalResponse: tar, ApprovalResponse: tar, ToolCall: tc, IncidentID: d.IncidentID, Would: d.Would,
		})
	}
	writeJSONStatus(w, http.StatusOK, resp)
}

// uniqueApprovalIDs refuses a request that names one approval twice: each occurrence would
// get its own answer, and the answers may contradict each other.
func uniqueApprovalIDs(ps []pendingApproval) error {
	first := make(map[string]int, len(ps))
	for i, p := range ps {
		if p.ApprovalID == "" {
			continue // normalize refuses it
		}
		if j, ok := first[p.ApprovalID]; ok {
			return fmt.Errorf("pendingApprovals[%d]: approvalId %q is duplicated (first at pendingApprovals[%d])", i, p.ApprovalID, j)
		}
		first[p.ApprovalID] = i
	}
	return nil
}

// needsApprovalRequest is POST /v1/workflow/needs-approval: the arguments of a workflow
// tool's needsApproval(input, {toolCallId}).
type needsApprovalRequest struct {
	ToolName   string          `json:"toolName"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Session    string          `json:"session,omitempty"`
	// OnAllow is auto (Allow needs no approval) or human (every call still goes to a human).
	OnAllow string `json:"onAllow,omitempty"`
}

// fatalError is the body of a refusal: FatalError.is() accepts it in workflow 4.x (name) and
// 5.x (name or fatal).
type fatalError struct {
	Name       string `json:"name"`
	Fatal      bool   `json:"fatal"`
	Message    string `json:"message"`
	Reason     string `json:"reason"`
	Code       string `json:"code,omitempty"`
	IncidentID string `json:"incidentId"`
}

// retryableCodes are the gate's own failures that a retry can cure: the snapshot may arrive
// or be repaired, and a crash may not repeat. The durable step retries on 503.
var retryableCodes = map[string]bool{
	gate.CodeGateCrashed: true, gate.CodeSnapshotMissing: true, gate.CodeSnapshotCorrupt: true, gate.CodeSnapshotUnverified: true,
}

func (a *API) needsApproval(w http.ResponseWriter, r *http.Request, caller Caller) {
	var req needsApprovalRequest
	if err := decodeStrict(r, &req); err != nil {
		badRequest(w, err)
		return
	}
	if req.ToolName == "" {
		badRequest(w, errors.New("toolName is required"))
		return
	}
	if req.OnAllow != "" && req.OnAllow != "auto" && req.OnAllow != "human" {
		badRequest(w, fmt.Errorf("onAllow %q is not auto or human", req.OnAllow))
		return
	}
	create, err := a.wantsApprovals(r)
	if err == nil && create && req.ToolCallID == "" {
		err = errors.New("toolCallId is required with " + HeaderHumanApproval + ": it names the call's ToolApproval")
	}
	if err != nil {
		badRequest(w, err)
		return
	}
	input, err := gate.RenderRawInput(req.Input)
	if err != nil {
		badRequest(w, fmt.Errorf("input is not JSON: %w", err))
		return
	}
	d := a.decide(&gate.Call{Tool: req.ToolName, Input: input, Surface: gate.SurfaceWorkflow, Session: req.Session}, caller, req.Input)
	switch d.Verdict {
	case gate.Allow:
		writeJSONStatus(w, http.StatusOK, withWould(map[string]any{"needsApproval": req.OnAllow == "human", "incidentId": d.IncidentID}, d))
	case gate.Ask:
		body := withWould(map[string]any{"needsApproval": true, "reason": d.Reason, "incidentId": d.IncidentID}, d)
		if create {
			ta, err := a.createApproval(r.Context(), approvals.Request{Surface: gatev1.SurfaceWorkflow, Session: req.Session, ToolUseID: req.ToolCallID, Tool: req.ToolName, Decision: d, RawInput: req.Input})
			if errors.Is(err, approvals.ErrNotTrusted) {
				// Never adopted, and no retry makes it this call's: the call is refused.
				writeJSONStatus(w, http.StatusConflict, fatalError{Name: "FatalError", Fatal: true, Message: notTrustedMessage(err), Reason: d.Reason,
					Code: CodeApprovalNotTrusted, IncidentID: d.IncidentID})
				return
			}
			if err != nil {
				// The durable step retries on 503; a human could not answer without the object.
				writeJSONStatus(w, http.StatusServiceUnavailable, map[string]any{"name": "RetryableError", "message": "the ToolApproval could not be created; retry", "incidentId": d.IncidentID})
				return
			}
			body["approvalName"] = ta.Name
			w.Header().Set(HeaderApprovalName, ta.Name)
		}
		writeJSONStatus(w, http.StatusOK, body)
	default:
		body := fatalError{Name: "FatalError", Fatal: true, Message: d.Message, Reason: d.Reason, Code: d.Code, IncidentID: d.IncidentID}
		if retryableCodes[d.Code] {
			writeJSONStatus(w, http.StatusServiceUnavailable, map[string]any{"name": "RetryableError", "message": d.Message, "code": d.Code, "incidentId": d.IncidentID})
			return
		}
		writeJSONStatus(w, http.StatusForbidden, body)
	}
}

// withWould adds to an answer the Ask or Block recorded and not enforced (Audit), if any.
func withWould(body map[string]any, d gate.Decision) map[string]any {
	if d.Would != nil {
		body["would"] = d.Would
	}
	return body
}
