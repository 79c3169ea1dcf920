package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// ConfirmerValidator warns when a SessionConfirmer's policyRef names no HarnessAgentPolicy in
// its namespace. It never refuses: the policy may be applied next (a GitOps sync applies both in
// one wave), and the controller reports PolicyResolved=False until it exists.
type ConfirmerValidator struct {
	// Reader reads policies from the API server.
	Reader client.Reader
}

var _ admission.Handler = (*ConfirmerValidator)(nil)

// Handle implements admission.Handler.
func (v *ConfirmerValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	sc := &gatev1.SessionConfirmer{}
	if err := json.Unmarshal(req.Object.Raw, sc); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the SessionConfirmer: %w", err))
	}
	if req.Operation == admissionv1.Update {
		old := &gatev1.SessionConfirmer{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err == nil && old.Spec.PolicyRef == sc.Spec.PolicyRef {
			return admission.Allowed("")
		}
	}
	name := sc.Spec.PolicyRef.Name
	err := v.Reader.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: name}, &gatev1.HarnessAgentPolicy{})
	switch {
	case apierrors.IsNotFound(err):
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"spec.policyRef.name: there is no HarnessAgentPolicy %q in namespace %s: the confirmer is not started (PolicyResolved=False) until it exists", name, req.Namespace))
	case err != nil:
		return admission.Allowed("").WithWarnings(fmt.Sprintf("spec.policyRef.name: HarnessAgentPolicy %q could not be looked up: %v", name, err))
	}
	return admission.Allowed("")
}
