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

// ConfirmerValidator refuses a SessionConfirmer naming a policy of another namespace
// (spec.policyRef.namespace) unless it is in a platform namespace, and warns when its
// policyRef names no HarnessAgentPolicy. A missing policy is never refused: it may be applied
// next (a GitOps sync applies both in one wave), and the controller reports
// PolicyResolved=False until it exists. The webhook is failurePolicy Ignore, so the controller
// refuses the namespace too.
type ConfirmerValidator struct {
	// Reader reads policies from the API server.
	Reader client.Reader
	// PlatformNamespaces are the namespaces whose SessionConfirmers may name a policy in
	// another namespace.
	PlatformNamespaces []string
}

var _ admission.Handler = (*ConfirmerValidator)(nil)

// Handle implements admission.Handler.
func (v *ConfirmerValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	sc := &gatev1.SessionConfirmer{}
	if err := json.Unmarshal(req.Object.Raw, sc); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the SessionConfirmer: %w", err))
	}
	sc.Namespace = req.Namespace
	if why := sc.ForbiddenPolicyNamespace(v.PlatformNamespaces); why != "" {
		return admission.Denied(why)
	}
	if req.Operation == admissionv1.Update {
		old := &gatev1.SessionConfirmer{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err == nil && old.Spec.PolicyRef == sc.Spec.PolicyRef {
			return admission.Allowed("")
		}
	}
	name, ns := sc.Spec.PolicyRef.Name, sc.PolicyNamespace()
	err := v.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &gatev1.HarnessAgentPolicy{})
	switch {
	case apierrors.IsNotFound(err):
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"spec.policyRef.name: there is no HarnessAgentPolicy %q in namespace %s: the confirmer is not started (PolicyResolved=False) until it exists", name, ns))
	case err != nil:
		return admission.Allowed("").WithWarnings(fmt.Sprintf("spec.policyRef.name: HarnessAgentPolicy %q could not be looked up: %v", name, err))
	}
	return admission.Allowed("")
}
