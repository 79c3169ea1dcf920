package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
)

// ClusterPolicyValidator refuses a ClusterHarnessAgentPolicy whose layer the controller could
// not publish as written: selectors apimachinery cannot evaluate, and rules that do not compile
// (the layer would then block every call of every pod it selects), with the field path and
// message the RulesCompiled condition would carry. It builds the layer with the controller's
// own recipe (bootstrap.ClusterLayerOf). Its webhook entry is failurePolicy Fail: unlike a
// namespace policy, a broken cluster policy stops pods in every namespace it selects.
type ClusterPolicyValidator struct{}

var _ admission.Handler = (*ClusterPolicyValidator)(nil)

// Handle implements admission.Handler.
func (v *ClusterPolicyValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	c := &gatev1.ClusterHarnessAgentPolicy{}
	if err := json.Unmarshal(req.Object.Raw, c); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the ClusterHarnessAgentPolicy: %w", err))
	}
	if req.Operation == admissionv1.Update {
		old := &gatev1.ClusterHarnessAgentPolicy{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the ClusterHarnessAgentPolicy in force: %w", err))
		}
		// Metadata, finalizers and deletion are never held up by the spec in force.
		if equality.Semantic.DeepEqual(old.Spec, c.Spec) || c.DeletionTimestamp != nil {
			return admission.Allowed("")
		}
	}
	if _, err := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector); err != nil {
		return invalid("ClusterHarnessAgentPolicy", c.Name, gate.FieldErrors{{Field: "spec.namespaceSelector", Message: err.Error()}})
	}
	if _, err := metav1.LabelSelectorAsSelector(&c.Spec.PodSelector); err != nil {
		return invalid("ClusterHarnessAgentPolicy", c.Name, gate.FieldErrors{{Field: "spec.podSelector", Message: err.Error()}})
	}
	_, errs, err := bootstrap.ClusterLayerOf(c, "")
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(errs) > 0 {
		return invalid("ClusterHarnessAgentPolicy", c.Name, errs)
	}
	return admission.Allowed("")
}
