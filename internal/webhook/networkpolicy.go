package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/egress"
)

// NetworkPolicyValidator refuses a tenant NetworkPolicy that would let pods under the egress
// ceiling of a ClusterHarnessAgentPolicy reach beyond it (egress.Beyond): NetworkPolicy allows
// add up, so one such policy would undo the ceiling the controller narrows the namespace
// policies' NetworkPolicies to. A ceiling governs the pods its podSelector selects in the
// namespaces its namespaceSelector selects; a NetworkPolicy is judged against every ceiling
// governing a pod it could select, and strictly: when either selector selects every pod, or a
// pod in the namespace now matches both. The operator's own NetworkPolicies are not judged: only
// the manager writes them (config/admission-policies/managed-children.yaml), within the ceilings.
type NetworkPolicyValidator struct {
	// Reader reads the cluster policies, the namespace and its pods' metadata from the API
	// server, never a cache: a ceiling applied a moment before holds.
	Reader client.Reader
	// DNS selects the cluster DNS pods, which a rule may open on port 53 under any ceiling.
	DNS egress.DNSSelector
	// ClusterPolicies says the manager reads cluster policies (it serves every namespace).
	// Without them there is no ceiling to judge by, and every NetworkPolicy is admitted.
	ClusterPolicies bool
}

var _ admission.Handler = (*NetworkPolicyValidator)(nil)

// Handle implements admission.Handler.
func (v *NetworkPolicyValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	np := &networkingv1.NetworkPolicy{}
	if err := json.Unmarshal(req.Object.Raw, np); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the NetworkPolicy: %w", err))
	}
	if np.Namespace == "" {
		np.Namespace = req.Namespace
	}
	if !v.ClusterPolicies || !egress.AllowsEgress(np) || np.Labels[gatev1.LabelManagedBy] == gatev1.ManagedByValue {
		return admission.Allowed("")
	}
	if req.Operation == admissionv1.Update {
		old := &networkingv1.NetworkPolicy{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the NetworkPolicy in force: %w", err))
		}
		// Metadata, finalizers and deletion widen nothing, and are never held up by the spec in
		// force (written before its ceiling, say).
		if equality.Semantic.DeepEqual(old.Spec, np.Spec) || np.DeletionTimestamp != nil {
			return admission.Allowed("")
		}
	}
	ceilings, err := v.ceilings(ctx, np)
	if err != nil {
		logf.FromContext(ctx).Error(err, "reading the egress ceilings of a NetworkPolicy's namespace", "namespace", np.Namespace, "networkPolicy", np.Name)
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf(
			"the egress ceilings of namespace %s could not be read, so NetworkPolicy %s cannot be judged against them: %w", np.Namespace, np.Name, err))
	}
	findings := egress.Beyond(np.Spec.Egress, ceilings, v.dns())
	if len(findings) == 0 {
		return admission.Allowed("")
	}
	names := make([]string, 0, len(ceilings))
	for _, c := range ceilings {
		names = append(names, c.Policy)
	}
	slices.Sort(names)
	for i, f := range findings {
		findings[i] = "spec." + f
	}
	return admission.Denied(fmt.Sprintf("NetworkPolicy %s would let governed pods reach beyond the egress ceiling of ClusterHarnessAgentPolicy %s: %s",
		np.Name, strings.Join(names, ", "), strings.Join(findings, "; ")))
}

// ceilings are the egress ceilings that govern a pod the NetworkPolicy could select: those of
// the cluster policies, not being deleted, whose namespaceSelector selects its namespace, and
// whose podSelector or the NetworkPolicy's selects every pod, or both select a pod there now.
// A pod labelled into both later is not judged until the NetworkPolicy's spec next changes.
func (v *NetworkPolicyValidator) ceilings(ctx context.Context, np *networkingv1.NetworkPolicy) ([]egress.Ceiling, error) {
	var list gatev1.ClusterHarnessAgentPolicyList
	if err := v.Reader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing ClusterHarnessAgentPolicies: %w", err)
	}
	theirs, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		theirs = labels.Everything() // the API server validated it; should it not parse, judge every pod
	}
	// The namespace's labels and the labels of the pods the NetworkPolicy selects are read once,
	// when first needed.
	var nsLabels labels.Set
	var pods []labels.Set
	listed := false
	var out []egress.Ceiling
	for i := range list.Items {
		c := &list.Items[i]
		if c.Spec.Egress == nil || !c.DeletionTimestamp.IsZero() {
			continue
		}
		if nsLabels == nil {
			if nsLabels, err = namespaceLabels(ctx, v.Reader, np.Namespace); err != nil {
				return nil, err
			}
		}
		if sel, err := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector); err != nil || !sel.Matches(nsLabels) {
			continue // as the controller does: a selector that cannot be evaluated selects nothing
		}
		ours, err := metav1.LabelSelectorAsSelector(&c.Spec.PodSelector)
		if err != nil {
			ours = labels.Everything() // the cluster policy webhook refuses it; govern every pod
		}
		if !ours.Empty() && !theirs.Empty() {
			if !listed {
				if pods, err = v.podLabels(ctx, np.Namespace, theirs); err != nil {
					return nil, err
				}
				listed = true
			}
			if !slices.ContainsFunc(pods, func(l labels.Set) bool { return ours.Matches(l) }) {
				continue
			}
		}
		out = append(out, egress.Ceiling{Policy: c.Name, Spec: c.Spec.Egress})
	}
	return out, nil
}

// namespaceLabels reads a namespace's labels (never nil), as metadata.
func namespaceLabels(ctx context.Context, r client.Reader, name string) (labels.Set, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	if ns.Labels == nil {
		return labels.Set{}, nil
	}
	return ns.Labels, nil
}

// podLabels are the labels of the namespace's pods that sel selects, read as metadata.
func (v *NetworkPolicyValidator) podLabels(ctx context.Context, namespace string, sel labels.Selector) ([]labels.Set, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := v.Reader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing the pods of namespace %s: %w", namespace, err)
	}
	out := make([]labels.Set, 0, len(list.Items))
	for _, p := range list.Items {
		out = append(out, p.Labels)
	}
	return out, nil
}

func (v *NetworkPolicyValidator) dns() egress.DNSSelector {
	if v.DNS.Namespace == "" {
		return egress.DefaultDNSSelector
	}
	return v.DNS
}
