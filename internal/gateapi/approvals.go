package gateapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/approvals"
	"github.com/intutic/gate-operator/internal/gate"
)

// The human lane of the HTTP surfaces (docs/approvals.md, "Harness and workflow code"). A
// caller opts in per request with the header HeaderHumanApproval: create; each Ask verdict of
// that request then gets a ToolApproval, named in the response (approvalName, and for the
// workflow route also the header HeaderApprovalName), which the caller polls with
// GET /v1/approvals/{name} until its state is final. Without the header the routes answer
// exactly as before, byte for byte.
const (
	HeaderHumanApproval = "Gate-Human-Approval"
	HeaderApprovalName  = "Gate-Approval-Name"
	humanApprovalCreate = "create"
)

// errNoApprovals is the refusal of an opt-in this confirmer cannot honour.
var errNoApprovals = errors.New("this confirmer creates no ToolApprovals: its SessionConfirmer did not configure the human lane (--confirmer-name)")

// wantsApprovals reads the opt-in: absent is false, "create" is true, anything else is an error.
func (a *API) wantsApprovals(r *http.Request) (bool, error) {
	v := r.Header.Get(HeaderHumanApproval)
	switch {
	case v == "":
		return false, nil
	case !strings.EqualFold(v, humanApprovalCreate):
		return false, errors.New(HeaderHumanApproval + ": the only value is " + humanApprovalCreate)
	case a.Approvals == nil:
		return false, errNoApprovals
	}
	return true, nil
}

// createApproval creates (or finds) the ToolApproval of one Ask verdict of an HTTP surface,
// due the confirmer's deadline from now: r's session is the caller's run or thread id (or the
// hook's session), its toolUseID the approval or tool-call id.
func (a *API) createApproval(ctx context.Context, r approvals.Request) (*gatev1.ToolApproval, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r.ExpiresAt = a.Approvals.Now().Add(a.Approvals.Deadline)
	ta, err := a.Approvals.Ensure(ctx, r)
	if err != nil {
		a.Log.Error(err, "creating a ToolApproval", "surface", r.Surface, "session", r.Session, "toolUseId", r.ToolUseID)
		return nil, err
	}
	return ta, nil
}

// CodeApprovalNotTrusted is the code of an answer about an object of an approval's name that
// this confirmer did not write for the call: it is never used, and no human can approve the
// call through it (a new tool-call id makes a new approval).
const CodeApprovalNotTrusted = "approval_not_trusted"

// notTrustedMessage is the refusal of such an object; it names the fields that differ, never
// their values.
func notTrustedMessage(err error) string {
	var nt *approvals.NotTrustedError
	if errors.As(err, &nt) {
		return gate.RefusalPrefix + nt.Error()
	}
	return gate.RefusalPrefix + "the ToolApproval of this call exists and does not describe it: it is not used, and the call is denied"
}

// approvalResponse is GET /v1/approvals/{name}.
type approvalResponse struct {
	Name string `json:"name"`
	// State is Pending, Approved, Denied, Expired or AnsweredInRuntime; only Approved lets the
	// call run.
	State     gatev1.ToolApprovalState `json:"state"`
	Message   string                   `json:"message,omitempty"`
	User      string                   `json:"user,omitempty"`
	ExpiresAt time.Time                `json:"expiresAt"`
}

// getApproval answers GET /v1/approvals/{name} for the approvals of this confirmer's HTTP
// surfaces: 404 for any other name, 409 (code approval_not_trusted) for an object of that name
// the confirmer did not write as it writes them (Store.TrustedObject: owner, labels, policy,
// surface, a name that is the hash of its spec's call, preview and deadline). An Approved
// without the approver recorded, or recorded after the deadline, is reported Pending: the
// caller must not run the call on it. Past the deadline a Pending approval is reported Expired
// only once Expired is recorded (the API server's clock measures the deadline, and an approval
// it admits before then counts); until then, for at most approvals.ExpiryGrace, it reads
// Pending.
func (a *API) getApproval(w http.ResponseWriter, r *http.Request, _ Caller) {
	if a.Approvals == nil {
		writeError(w, http.StatusNotFound, errNoApprovals.Error())
		return
	}
	name := r.PathValue("name")
	ta, err := a.Approvals.Get(r.Context(), name)
	switch {
	case apierrors.IsNotFound(err):
		writeError(w, http.StatusNotFound, "no ToolApproval "+name+" of this confirmer")
		return
	case err != nil:
		a.requestLog(r).Error(err, "reading a ToolApproval", "approval", name)
		writeError(w, http.StatusServiceUnavailable, "the ToolApproval could not be read; retry")
		return
	}
	if ta.Spec.Surface == gatev1.SurfaceManagedAgents || !a.Approvals.TrustedObject(ta) {
		writeConflict(w, gate.RefusalPrefix+"ToolApproval "+name+
			" was not written by this confirmer for a call of its HTTP surfaces: it is not used, and its call must not run", CodeApprovalNotTrusted)
		return
	}
	writeJSONStatus(w, http.StatusOK, a.answerOf(r, ta))
}

// answerOf is what an approval of an HTTP surface answers now. Past its deadline a Pending
// approval is reported Expired only once Expired is recorded (getApproval says why).
func (a *API) answerOf(r *http.Request, ta *gatev1.ToolApproval) approvalResponse {
	now := a.Approvals.Now()
	state := approvals.EffectiveState(ta, now)
	if !ta.Status.State.Final() && !now.Before(ta.Spec.ExpiresAt.Time) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		fresh, err := a.Approvals.Expire(ctx, ta)
		cancel()
		switch {
		case err == nil, errors.Is(err, approvals.ErrSettled):
			ta, state = fresh, approvals.EffectiveState(fresh, now)
		case now.Before(ta.Spec.ExpiresAt.Add(approvals.ExpiryGrace)):
			// Refused (the API server's clock, which measures the deadline, is behind) or failed:
			// a human may still answer, so the caller reads Pending until Expired is recorded.
			a.requestLog(r).Error(err, "recording Expired; the caller reads Pending until it is", "approval", ta.Name)
			state = gatev1.ApprovalPending
		default:
			a.requestLog(r).Error(err, "recording Expired; the caller reads Expired without it", "approval", ta.Name)
		}
	}
	resp := approvalResponse{Name: ta.Name, State: state, ExpiresAt: ta.Spec.ExpiresAt.UTC()}
	if d := ta.Status.Decision; d != nil && resp.State == ta.Status.State {
		resp.Message, resp.User = d.Message, d.User
	}
	return resp
}
