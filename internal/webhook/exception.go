package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
)

// ExceptionRecorder records who wrote a GateException's spec, and when, from the request: the
// annotations gate.intutic.io/requested-by and gate.intutic.io/requested-at, replacing whatever
// the client wrote there. A request that leaves the spec as it is keeps them, so a label or a
// finalizer never restarts the exception's maxDuration.
type ExceptionRecorder struct {
	// Clock is the server's clock; nil is the real clock.
	Clock clock.PassiveClock
}

var _ admission.Handler = (*ExceptionRecorder)(nil)

// Handle implements admission.Handler.
func (r *ExceptionRecorder) Handle(_ context.Context, req admission.Request) admission.Response {
	gex, old, resp := decodeExceptions(req)
	if resp != nil {
		return *resp
	}
	annotations := map[string]string{}
	for k, v := range gex.Annotations {
		annotations[k] = v
	}
	if old != nil && equality.Semantic.DeepEqual(old.Spec, gex.Spec) {
		// The spec is not written: the record of who wrote it stays the old one's.
		restore := func(k string) {
			if v, ok := old.Annotations[k]; ok {
				annotations[k] = v
			} else {
				delete(annotations, k)
			}
		}
		restore(gatev1.AnnotationRequestedBy)
		restore(gatev1.AnnotationRequestedAt)
	} else {
		annotations[gatev1.AnnotationRequestedBy] = req.UserInfo.Username
		annotations[gatev1.AnnotationRequestedAt] = now(r.Clock).UTC().Format(time.RFC3339)
	}
	if equality.Semantic.DeepEqual(annotations, gex.Annotations) {
		return admission.Allowed("")
	}
	return admission.Patched("requester recorded", jsonpatch.NewOperation("add", "/metadata/annotations", annotations))
}

// ExceptionValidator admits a GateException only when the policy it names allows it
// (bootstrap.JudgeException, judged as of the request: it must be Active) and a
// LocalSubjectAccessReview in the exception's namespace says the requester may exempt that
// policy: the verb exempt on clusterharnessagentpolicies/<name> or
// harnessagentpolicies/<name>, as approve is for approvals. The review is namespaced, so a
// platform team can grant exempt on a cluster policy to one tenant namespace with a RoleBinding.
type ExceptionValidator struct {
	// Reader reads the policies and the namespace (the manager's API reader).
	Reader client.Reader
	// Reviews creates the LocalSubjectAccessReviews.
	Reviews client.Client
	// Clock is the server's clock; nil is the real clock.
	Clock clock.PassiveClock
}

var _ admission.Handler = (*ExceptionValidator)(nil)

// Handle implements admission.Handler.
func (v *ExceptionValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	gex, old, resp := decodeExceptions(req)
	if resp != nil {
		return *resp
	}
	if old != nil && (equality.Semantic.DeepEqual(old.Spec, gex.Spec) || gex.DeletionTimestamp != nil) {
		return admission.Allowed("") // metadata, finalizers and deletion need no exempt
	}
	target, err := v.target(ctx, gex)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	at := now(v.Clock)
	judged := gex.DeepCopy()
	if judged.Annotations == nil {
		judged.Annotations = map[string]string{}
	}
	judged.Annotations[gatev1.AnnotationRequestedAt] = at.UTC().Format(time.RFC3339) // this request starts its duration
	switch phase, msg := bootstrap.JudgeException(judged, target, at); phase {
	case gatev1.ExceptionExpired:
		return exceptionRefused(gex, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "spec.expiresAt", "spec.expiresAt is not in the future: %s", msg)
	case gatev1.ExceptionRefused:
		return exceptionRefused(gex, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "spec", "%s", msg)
	}
	resource := "harnessagentpolicies"
	if gex.Spec.PolicyRef.Kind == gatev1.ExceptionOfClusterPolicy {
		resource = "clusterharnessagentpolicies"
	}
	u := req.UserInfo
	review := &authorizationv1.LocalSubjectAccessReview{
		ObjectMeta: metav1.ObjectMeta{Namespace: gex.Namespace},
		Spec: authorizationv1.SubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: gex.Namespace, Verb: gatev1.ExemptVerb, Group: gatev1.GroupVersion.Group, Resource: resource, Name: gex.Spec.PolicyRef.Name,
			},
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra(u.Extra),
		},
	}
	if err := v.Reviews.Create(ctx, review); err != nil {
		// Fail closed: no answer from the authorizer, no exception.
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf(
			"checking whether %s may exempt %s %s (LocalSubjectAccessReview): %w", u.Username, gex.Spec.PolicyRef.Kind, gex.Spec.PolicyRef.Name, err))
	}
	if !review.Status.Allowed || review.Status.Denied {
		return exceptionRefused(gex, http.StatusForbidden, metav1.StatusReasonForbidden, "spec.policyRef",
			"%s may not exempt %s %s: that takes the verb exempt on %s/%s in namespace %s", u.Username, gex.Spec.PolicyRef.Kind, gex.Spec.PolicyRef.Name, resource, gex.Spec.PolicyRef.Name, gex.Namespace)
	}
	return admission.Allowed("")
}

// target reads the policy an exception names, and its namespace's labels.
func (v *ExceptionValidator) target(ctx context.Context, gex *gatev1.GateException) (bootstrap.ExceptionTarget, error) {
	var t bootstrap.ExceptionTarget
	ns := &corev1.Namespace{}
	if err := v.Reader.Get(ctx, types.NamespacedName{Name: gex.Namespace}, ns); err != nil {
		return t, fmt.Errorf("reading namespace %s: %w", gex.Namespace, err)
	}
	t.NamespaceLabels = ns.Labels
	var obj client.Object
	key := types.NamespacedName{Name: gex.Spec.PolicyRef.Name}
	switch gex.Spec.PolicyRef.Kind {
	case gatev1.ExceptionOfClusterPolicy:
		t.Cluster = &gatev1.ClusterHarnessAgentPolicy{}
		obj = t.Cluster
	default:
		t.Namespace, key.Namespace = &gatev1.HarnessAgentPolicy{}, gex.Namespace
		obj = t.Namespace
	}
	switch err := v.Reader.Get(ctx, key, obj); {
	case apierrors.IsNotFound(err):
		t.Cluster, t.Namespace = nil, nil
	case err != nil:
		return t, fmt.Errorf("reading %s %s: %w", gex.Spec.PolicyRef.Kind, key.Name, err)
	}
	return t, nil
}

// decodeExceptions decodes a GateException request: the object, and the old one of an update.
func decodeExceptions(req admission.Request) (gex, old *gatev1.GateException, resp *admission.Response) {
	gex = &gatev1.GateException{}
	if err := json.Unmarshal(req.Object.Raw, gex); err != nil {
		r := admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the GateException: %w", err))
		return nil, nil, &r
	}
	if gex.Namespace == "" {
		gex.Namespace = req.Namespace
	}
	if req.Operation == admissionv1.Update {
		old = &gatev1.GateException{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			r := admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the GateException in force: %w", err))
			return nil, nil, &r
		}
	}
	return gex, old, nil
}

func exceptionRefused(gex *gatev1.GateException, code int32, reason metav1.StatusReason, field, format string, args ...any) admission.Response {
	resp := refuse(code, reason, field, format, args...)
	resp.Result.Details.Kind, resp.Result.Details.Name = "GateException", gex.Name
	return resp
}
