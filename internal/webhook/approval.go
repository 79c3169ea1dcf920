package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"gomodules.xyz/jsonpatch/v2"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// The paths of the two ToolApproval decision webhooks (on toolapprovals/status updates).
const (
	ApprovalRecorderPath  = "/mutate-toolapproval-status"
	ApprovalValidatorPath = "/validate-toolapproval-status"
)

// ApproverClusterRole is the ClusterRole the installs ship for approvers; refusals name it.
const ApproverClusterRole = "gate-operator-approver"

// ApprovalRecorder writes who decided a ToolApproval, and when, from the admission request:
// whenever a status update moves it from Pending to a final state, status.decision's user, uid
// and groups become the request's authenticated user and its time the server's clock, whatever
// the client wrote there. The message is the client's.
type ApprovalRecorder struct {
	// Clock is the server's clock; nil is the real clock.
	Clock clock.PassiveClock
}

var _ admission.Handler = (*ApprovalRecorder)(nil)

// Handle implements admission.Handler.
func (r *ApprovalRecorder) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update || req.SubResource != "status" {
		return admission.Allowed("")
	}
	old, ta, resp := decodeApprovals(req)
	if resp != nil {
		return *resp
	}
	if old.Status.State.Final() || !ta.Status.State.Final() {
		return admission.Allowed("")
	}
	d := decisionOf(req.UserInfo, now(r.Clock))
	if ta.Status.Decision != nil {
		d.Message = ta.Status.Decision.Message
	}
	// One operation replaces the whole decision, so a uid or group the client wrote cannot stay.
	return admission.Patched("decision recorded from the request", jsonpatch.NewOperation("add", "/status/decision", d))
}

// decisionOf is the decision the request's user makes at t.
func decisionOf(u authenticationv1.UserInfo, t time.Time) gatev1.ToolApprovalDecision {
	return gatev1.ToolApprovalDecision{User: u.Username, UID: u.UID, Groups: u.Groups, Time: &metav1.Time{Time: t}}
}

// ApprovalValidator refuses a ToolApproval status update that is not a decision its requester
// may make, when they may make it:
//   - any change once the state is final: a decision never changes;
//   - a state that disagrees with the conditions (a final state comes with its condition True,
//     and no other final condition is True);
//   - Approved or Denied unless a SubjectAccessReview says the requester may approve the policy
//     (the verb approve on harnessagentpolicies/<spec.policy> in the approval's namespace), or
//     at or after spec.expiresAt, by this clock or by the decision's recorded time;
//   - Expired before spec.expiresAt, and Expired or AnsweredInRuntime from anyone but the
//     ServiceAccount of the SessionConfirmer that owns the approval;
//   - a decision whose user, uid or groups are not the requester's (ApprovalRecorder writes
//     them; this holds should another mutating webhook change them after it).
type ApprovalValidator struct {
	// Reviews creates the LocalSubjectAccessReviews that say who may approve: namespaced, so the
	// manager's RBAC for them holds also when it is bound per namespace (--namespaces).
	Reviews client.Client
	// Clock is the server's clock; nil is the real clock.
	Clock clock.PassiveClock
}

var _ admission.Handler = (*ApprovalValidator)(nil)

// Handle implements admission.Handler.
func (v *ApprovalValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update || req.SubResource != "status" {
		return admission.Allowed("")
	}
	old, ta, resp := decodeApprovals(req)
	if resp != nil {
		return *resp
	}
	if old.Status.State.Final() {
		return unchanged(old, ta)
	}
	if msg, field := conditionsDisagree(&ta.Status); msg != "" {
		return refuse(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, field, "%s", msg)
	}
	if !ta.Status.State.Final() {
		if d := ta.Status.Decision; d != nil && (d.User != "" || d.UID != "" || len(d.Groups) > 0 || d.Time != nil) {
			return refuse(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "status.decision",
				"status.decision.user, uid, groups and time are recorded by the API server when the state becomes final; leave them empty while the state is %s", ta.Status.State.OrPending())
		}
		return admission.Allowed("")
	}
	return v.decision(ctx, req, ta)
}

// unchanged allows an update of a decided approval only when it leaves the status as it is.
func unchanged(old, ta *gatev1.ToolApproval) admission.Response {
	if equality.Semantic.DeepEqual(old.Status, ta.Status) {
		return admission.Allowed("")
	}
	return refuse(http.StatusConflict, metav1.StatusReasonConflict, "status", "%s", old.SettledRefusal())
}

// decision judges an update that moves a pending approval to a final state.
func (v *ApprovalValidator) decision(ctx context.Context, req admission.Request, ta *gatev1.ToolApproval) admission.Response {
	ref := ta.Namespace + "/" + ta.Name
	d, u := ta.Status.Decision, req.UserInfo
	if d == nil || d.User != u.Username || d.UID != u.UID || !slices.Equal(d.Groups, u.Groups) || d.Time == nil {
		return refuse(http.StatusForbidden, metav1.StatusReasonForbidden, "status.decision",
			"status.decision must name the user who makes the decision (%s) and its time: the webhook %s records them; another mutating webhook changed them", u.Username, ApprovalRecorderPath)
	}
	now := now(v.Clock)
	expires := ta.Spec.ExpiresAt.Time
	switch {
	case ta.Status.State.ByApprover():
		// The recorded time is what the confirmer reads (an approval counts only before
		// expiresAt): with two manager replicas it is another clock than this one, and both
		// must be before the deadline, or the record would say Approved for a call denied.
		if !now.Before(expires) || !d.Time.Before(&ta.Spec.ExpiresAt) {
			return refuse(http.StatusForbidden, metav1.StatusReasonForbidden, "status.state",
				"the decision arrived after the deadline: ToolApproval %s expired at %s (spec.expiresAt), and its call is denied without an answer", ref, expires.UTC().Format(time.RFC3339))
		}
		return v.mayApprove(ctx, req, ta)
	case ta.Status.State == gatev1.ApprovalExpired:
		if now.Before(expires) {
			return refuse(http.StatusForbidden, metav1.StatusReasonForbidden, "status.state",
				"ToolApproval %s does not expire before %s (spec.expiresAt): status.state Expired is refused until then", ref, expires.UTC().Format(time.RFC3339))
		}
	}
	// Expired and AnsweredInRuntime: only the confirmer that holds the call knows either.
	return confirmerOnly(u.Username, ta)
}

// mayApprove asks the API server whether the requester may approve the approval's policy.
func (v *ApprovalValidator) mayApprove(ctx context.Context, req admission.Request, ta *gatev1.ToolApproval) admission.Response {
	u := req.UserInfo
	resource, name := "harnessagentpolicies", ta.Spec.Policy
	if ta.Spec.ClusterPolicy != "" {
		// A cluster layer held the call: it is the cluster policy's to approve.
		resource, name = "clusterharnessagentpolicies", ta.Spec.ClusterPolicy
	}
	attrs := &authorizationv1.ResourceAttributes{
		Namespace: ta.Namespace,
		Verb:      gatev1.ApproveVerb,
		Group:     gatev1.GroupVersion.Group,
		Version:   gatev1.GroupVersion.Version,
		Resource:  resource,
		Name:      name,
	}
	review := &authorizationv1.LocalSubjectAccessReview{
		ObjectMeta: metav1.ObjectMeta{Namespace: ta.Namespace},
		Spec: authorizationv1.SubjectAccessReviewSpec{
			ResourceAttributes: attrs, User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra(u.Extra),
		},
	}
	if err := v.Reviews.Create(ctx, review); err != nil {
		// Fail closed: no answer from the authorizer, no decision.
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf(
			"checking whether %s may approve calls of policy %s/%s (LocalSubjectAccessReview): %w", u.Username, ta.Namespace, ta.Spec.Policy, err))
	}
	if review.Status.Allowed && !review.Status.Denied {
		return admission.Allowed("")
	}
	verb := "approve"
	if ta.Status.State == gatev1.ApprovalDenied {
		verb = "deny"
	}
	if ta.Spec.ClusterPolicy != "" {
		return refuse(http.StatusForbidden, metav1.StatusReasonForbidden, "status.state",
			"user %s may not %s calls held by ClusterHarnessAgentPolicy %s: needs the verb approve on clusterharnessagentpolicies/%s in namespace %s",
			u.Username, verb, name, name, ta.Namespace)
	}
	return refuse(http.StatusForbidden, metav1.StatusReasonForbidden, "status.state",
		"user %s may not %s calls of policy %s/%s: needs the verb approve on harnessagentpolicies/%s in namespace %s (bind the ClusterRole %s)",
		u.Username, verb, ta.Namespace, ta.Spec.Policy, ta.Spec.Policy, ta.Namespace, ApproverClusterRole)
}

// confirmerOnly allows the update only to the ServiceAccount of the SessionConfirmer owning ta.
func confirmerOnly(user string, ta *gatev1.ToolApproval) admission.Response {
	owner := ""
	for _, r := range ta.OwnerReferences {
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err == nil && gv.Group == gatev1.GroupVersion.Group && r.Kind == "SessionConfirmer" {
			owner = r.Name
			break
		}
	}
	if owner == "" {
		return refuse(http.StatusForbidden, metav1.StatusReasonForbidden, "status.state",
			"status.state %s is written only by the SessionConfirmer that holds the call, and ToolApproval %s/%s has no SessionConfirmer owner: approve or deny it instead",
			ta.Status.State, ta.Namespace, ta.Name)
	}
	// The confirmer's ServiceAccount is <name>-confirmer (controllers' confirmerName).
	want := "system:serviceaccount:" + ta.Namespace + ":" + owner + "-confirmer"
	if user != want {
		return refuse(http.StatusForbidden, metav1.StatusReasonForbidden, "status.state",
			"status.state %s is written only by SessionConfirmer %s (as %s), not by %s: approve or deny the call instead",
			ta.Status.State, owner, want, user)
	}
	return admission.Allowed("")
}

// conditionsDisagree returns why the state and the conditions disagree, and the field at fault.
func conditionsDisagree(s *gatev1.ToolApprovalStatus) (string, string) {
	want := s.State.ConditionType()
	if s.State.Final() && !meta.IsStatusConditionTrue(s.Conditions, want) {
		return fmt.Sprintf("status.state %s needs the condition %s with status True in status.conditions", s.State, want), "status.conditions"
	}
	for _, c := range s.Conditions {
		if c.Type != want && c.Status == metav1.ConditionTrue && gatev1.IsToolApprovalFinalCondition(c.Type) {
			return fmt.Sprintf("status.conditions: %s is True but status.state is %s: set the state and its one condition together", c.Type, s.State.OrPending()), "status.conditions"
		}
	}
	return "", ""
}

// decodeApprovals decodes the update's old and new ToolApproval, or returns the refusal.
func decodeApprovals(req admission.Request) (old, ta *gatev1.ToolApproval, resp *admission.Response) {
	old, ta = &gatev1.ToolApproval{}, &gatev1.ToolApproval{}
	if err := json.Unmarshal(req.Object.Raw, ta); err != nil {
		r := admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the ToolApproval: %w", err))
		return nil, nil, &r
	}
	if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
		r := admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the ToolApproval in force: %w", err))
		return nil, nil, &r
	}
	for _, o := range []*gatev1.ToolApproval{old, ta} {
		if o.Namespace == "" {
			o.Namespace = req.Namespace
		}
	}
	return old, ta, nil
}

// refuse denies with an API status naming the field, as the API server refuses an invalid object.
func refuse(code int32, reason metav1.StatusReason, field, format string, args ...any) admission.Response {
	msg := fmt.Sprintf(format, args...)
	resp := admission.Denied(msg)
	resp.Result.Code = code
	resp.Result.Reason = reason
	resp.Result.Details = &metav1.StatusDetails{
		Group: gatev1.GroupVersion.Group, Kind: "ToolApproval",
		Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: field, Message: msg}},
	}
	return resp
}

func extra(in map[string]authenticationv1.ExtraValue) map[string]authorizationv1.ExtraValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = authorizationv1.ExtraValue(v)
	}
	return out
}

// now reads c, the real clock when c is nil.
func now(c clock.PassiveClock) time.Time {
	if c == nil {
		c = clock.RealClock{}
	}
	return c.Now()
}
