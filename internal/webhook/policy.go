package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
)

// PolicyValidator refuses a HarnessAgentPolicy whose rules the controller could not publish:
// it builds the bootstrap bundle with the controller's own recipe (bootstrap.Build), so a rule
// that does not compile, does not type to bool, or a bundle that would not fit in a ConfigMap is
// refused with the field path and message the RulesCompiled condition would carry. What is legal
// but probably wrong comes back as warnings (PolicyWarnings).
type PolicyValidator struct {
	// Bootstrap are the manager's bundle options, so the bundle is judged as it would be rendered.
	Bootstrap bootstrap.Options
}

var _ admission.Handler = (*PolicyValidator)(nil)

// Handle implements admission.Handler.
func (v *PolicyValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	p := &gatev1.HarnessAgentPolicy{}
	if err := json.Unmarshal(req.Object.Raw, p); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the HarnessAgentPolicy: %w", err))
	}
	if p.Namespace == "" {
		p.Namespace = req.Namespace
	}
	if req.Operation == admissionv1.Update {
		old := &gatev1.HarnessAgentPolicy{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the HarnessAgentPolicy in force: %w", err))
		}
		// A policy written while the webhook was down (its status says what is wrong with it)
		// must still take labels, annotations, finalizers and its deletion.
		if equality.Semantic.DeepEqual(old.Spec, p.Spec) || p.DeletionTimestamp != nil {
			return admission.Allowed("")
		}
	}
	res, err := bootstrap.Build(p, bootstrap.Published{}, v.Bootstrap)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(res.CompileErrs) > 0 {
		return invalid("HarnessAgentPolicy", p.Name, res.CompileErrs)
	}
	if res.RenderErr != nil {
		return invalid("HarnessAgentPolicy", p.Name, gate.FieldErrors{{Field: "spec.rules", Message: res.RenderErr.Error() + "; shorten the rules or split the policy"}})
	}
	return admission.Allowed("").WithWarnings(PolicyWarnings(p)...)
}

// invalid refuses a policy of a kind for its field errors, as the API server refuses an invalid object
// (422, reason Invalid, a cause per field), each written as the RulesCompiled condition writes
// it: "spec.rules[2].when: <the compiler's message>".
func invalid(kind, name string, errs gate.FieldErrors) admission.Response {
	msgs := make([]string, 0, len(errs))
	causes := make([]metav1.StatusCause, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: e.Field, Message: e.Message})
	}
	resp := admission.Denied(strings.Join(msgs, "; "))
	resp.Result.Code = http.StatusUnprocessableEntity
	resp.Result.Reason = metav1.StatusReasonInvalid
	resp.Result.Details = &metav1.StatusDetails{
		Group: gatev1.GroupVersion.Group, Kind: kind, Name: name, Causes: causes,
	}
	return resp
}
