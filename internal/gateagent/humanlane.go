package gateagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/gate"
)

// HumanLane holds the Ask verdicts of a pod's Claude Code calls for a human
// (docs/gate-agent.md, "A human lane"): the sidecar asks its SessionConfirmer's gate API for the
// call's ToolApproval, creating it the first time, and answers the hook from it. Pending is
// "defer" (a print-mode run ends with the call pending), Approved an allow, any other final
// state a deny. When the confirmer cannot be asked, the Ask stands: Claude Code's own
// permission flow holds the call, as without the lane. Nothing here ever allows a call the
// rules did not send to a human, and the rules in force decide again on every resume.
type HumanLane struct {
	// URL is the confirmer's gate API, http://<name>-confirmer.<namespace>.svc:8080.
	URL string
	// TokenFile is the projected ServiceAccount token bound to the pod, with the confirmer's
	// audience, mounted into this container only. It is read per request: kubelet rotates it.
	TokenFile string
}

// humanLaneTimeout bounds one request to the confirmer: it leaves gate-client's 1.5 s deadline
// half a second for the rest of the decision.
const humanLaneTimeout = time.Second

// Outcomes of the human lane, in records (approval.outcome) and in
// gate_agent_human_lane_total.
const (
	laneDeferred    = "Deferred"
	laneAllowed     = "Allowed"
	laneDenied      = "Denied"
	laneUnavailable = "unavailable"
	laneRefused     = "refused"
)

// Codes of a call a human did not approve.
const (
	CodeApprovalDenied  = "approval_denied"
	CodeApprovalExpired = "approval_expired"
)

// laneApproval is the confirmer's answer: GET /v1/approvals/{name}'s body.
type laneApproval struct {
	Name    string                   `json:"name"`
	State   gatev1.ToolApprovalState `json:"state"`
	Message string                   `json:"message"`
	User    string                   `json:"user"`
}

// laneRefusal is the confirmer's error body.
type laneRefusal struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// maxLaneAnswer bounds the confirmer's answer read.
const maxLaneAnswer = 64 << 10

// approval asks the confirmer for the ToolApproval of a call the sidecar decided Ask: input is
// the hook input, policy the pod's policy (namespace/name).
func (h *HumanLane) approval(ctx context.Context, input []byte, policy string, d gate.Decision) (laneApproval, error) {
	token, err := os.ReadFile(h.TokenFile)
	if err != nil {
		return laneApproval{}, fmt.Errorf("reading the confirmer token: %w", err)
	}
	body, err := json.Marshal(map[string]any{"runtime": "claude-code", "input": json.RawMessage(input), "policy": policy,
		"decision": map[string]any{"verdict": d.Verdict, "rule": d.Rule, "reason": d.Reason, "layer": d.Layer, "snapshotDigest": d.SnapshotDigest, "incidentId": d.IncidentID}})
	if err != nil {
		return laneApproval{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, humanLaneTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(h.URL, "/")+"/v1/hook/approvals", bytes.NewReader(body))
	if err != nil {
		return laneApproval{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Gate-Human-Approval", "create")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return laneApproval{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxLaneAnswer))
	if err != nil {
		return laneApproval{}, fmt.Errorf("reading the confirmer's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var r laneRefusal
		_ = json.Unmarshal(raw, &r) // an unreadable body leaves the status to say what happened
		return laneApproval{}, &laneError{status: resp.StatusCode, msg: r.Error, code: r.Code}
	}
	var a laneApproval
	if err := json.Unmarshal(raw, &a); err != nil || a.Name == "" {
		return laneApproval{}, errors.New("the confirmer's answer is not an approval")
	}
	return a, nil
}

// laneError is a confirmer's refusal: its status, message and code.
type laneError struct {
	status    int
	msg, code string
}

func (e *laneError) Error() string {
	return fmt.Sprintf("the confirmer answered %d %s: %s", e.status, e.code, e.msg)
}

// held is a decision the human lane answered: the decision in effect, whether it is a defer,
// and the approval record.
type held struct {
	d        gate.Decision
	deferred bool
	approval *decisionlog.ApprovalRecord
	outcome  string
}

// holdForHuman answers an Ask of a Claude Code call through the human lane.
func (s *Server) holdForHuman(input []byte, policy string, d gate.Decision) held {
	if policy == "" {
		s.log.Info("an Ask is not held for a human: the pod's bundle names no policy of its namespace", "incidentId", d.IncidentID)
		return held{d: d, outcome: laneUnavailable}
	}
	a, err := s.opts.HumanLane.approval(context.Background(), input, policy, d)
	var le *laneError
	switch {
	case errors.As(err, &le) && le.status == http.StatusConflict:
		// The confirmer refused the call for good: its approval exists and does not describe
		// it, or the pod's policy is not the confirmer's. The call must not run, and no human
		// can approve it as it is: a deny that says why.
		s.log.Info("the confirmer refused to hold the call", "code", le.code, "status", le.status, "incidentId", d.IncidentID)
		out := d
		out.Verdict, out.Code = gate.Block, le.code
		out.Reason = "the call was held for a human and the confirmer refused it: " + strings.TrimPrefix(le.msg, gate.RefusalPrefix)
		out.Message = gate.RefusalPrefix + out.Reason
		return held{d: out, outcome: laneRefused}
	case err != nil:
		// The error names the confirmer's address at most, never the token or the input.
		s.log.Error(err, "the confirmer could not be asked; the Ask stands (Claude Code's own prompt)", "incidentId", d.IncidentID)
		return held{d: d, outcome: laneUnavailable}
	}
	rec := &decisionlog.ApprovalRecord{Name: a.Name, State: string(a.State), User: a.User}
	out := d
	switch a.State {
	case gatev1.ApprovalPending:
		rec.Outcome = laneDeferred
		out.Reason = d.Reason + " (held for a human: ToolApproval " + a.Name + "; resume the session once it is answered)"
		return held{d: out, deferred: true, approval: rec, outcome: laneDeferred}
	case gatev1.ApprovalApproved:
		rec.Outcome = laneAllowed
		out.Verdict = gate.Allow
		out.Reason = "approved by " + a.User + " (ToolApproval " + a.Name + ")"
		if a.Message != "" {
			out.Reason += ": " + a.Message
		}
		return held{d: out, approval: rec, outcome: laneAllowed}
	default:
		rec.Outcome = laneDenied
		out.Verdict, out.Code = gate.Block, CodeApprovalDenied
		out.Reason = "ToolApproval " + a.Name + " was " + strings.ToLower(string(a.State))
		if a.State == gatev1.ApprovalExpired {
			out.Code = CodeApprovalExpired
			out.Reason += ": nobody answered in time"
		}
		if a.User != "" {
			out.Reason += " by " + a.User
		}
		if a.Message != "" {
			out.Reason += ": " + a.Message
		}
		out.Message = gate.RefusalPrefix + out.Reason
		return held{d: out, approval: rec, outcome: laneDenied}
	}
}

// podPolicy is the namespace/name of the pod's own policy: the snapshot's, or for a layered
// bundle its namespace layer's, as the decision's layers name it.
func podPolicy(lp *loadedPolicy, d gate.Decision) string {
	if strings.Contains(lp.policy, "/") {
		return lp.policy
	}
	for _, l := range d.Layers {
		if p, ok := strings.CutPrefix(l.Layer, gate.LayerKindNamespace+"/"); ok {
			return p
		}
	}
	return ""
}
