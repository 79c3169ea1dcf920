package webhook

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
)

// selectingClusterPolicies are the ClusterHarnessAgentPolicies whose namespaceSelector selects
// the namespace and whose podSelector selects the pod (as it is labelled on arrival), by name.
func (h *PodInjector) selectingClusterPolicies(ctx context.Context, ns string, pod *corev1.Pod) ([]gatev1.ClusterHarnessAgentPolicy, error) {
	if !h.ClusterPolicies || slices.Contains(gatev1.SystemNamespaces, ns) {
		return nil, nil
	}
	var list gatev1.ClusterHarnessAgentPolicyList
	if err := h.Reader.List(ctx, &list); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	nsLabels, err := namespaceLabels(ctx, h.Reader, ns)
	if err != nil {
		return nil, err
	}
	var out []gatev1.ClusterHarnessAgentPolicy
	for _, c := range list.Items {
		if c.DeletionTimestamp != nil {
			continue
		}
		nsSel, err := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector)
		if err != nil || !nsSel.Matches(nsLabels) {
			continue // a selector the webhook refused selects nothing
		}
		podSel, err := metav1.LabelSelectorAsSelector(&c.Spec.PodSelector)
		if err != nil || !podSel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b gatev1.ClusterHarnessAgentPolicy) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// skipRefusal says why the pod's AnnotationSkipContainers may not leave out what it names, or
// "": a container that cluster policies govern may be left out only if every one of them lists
// it in spec.skipContainers.
func skipRefusal(pod *corev1.Pod, clusters []gatev1.ClusterHarnessAgentPolicy) string {
	if len(clusters) == 0 {
		return ""
	}
	skip, _ := skippedContainers(pod)
	for _, name := range slices.Sorted(maps.Keys(skip)) {
		for _, c := range clusters {
			if !slices.Contains(c.Spec.SkipContainers, name) {
				return fmt.Sprintf("annotation %s leaves out %q, which ClusterHarnessAgentPolicy %s governs and does not list in spec.skipContainers: remove it from the annotation, or ask the platform team to list it",
					AnnotationSkipContainers, name, c.Name)
			}
		}
	}
	return ""
}

// namespacePolicyOf names the one HarnessAgentPolicy of the namespace whose podSelector selects
// an unlabelled pod, or "" for none; several are a refusal (which one governs is the pod's to
// say, with the label).
func (h *PodInjector) namespacePolicyOf(ctx context.Context, ns string, pod *corev1.Pod) (name, refusal string, err error) {
	var list gatev1.HarnessAgentPolicyList
	if err := h.Reader.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return "", "", err
	}
	var names []string
	for _, p := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if p.DeletionTimestamp != nil || err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		names = append(names, p.Name)
	}
	switch len(names) {
	case 0:
		return "", "", nil
	case 1:
		return names[0], "", nil
	}
	slices.Sort(names)
	return "", fmt.Sprintf("the pod is selected by the HarnessAgentPolicies %s of namespace %s: label it %s: <name> to say which one governs it",
		strings.Join(names, ", "), ns, gatev1.LabelPolicy), nil
}

// governingBaseline governs an unlabelled pod that cluster policies select and no namespace
// policy does with the namespace's baseline bundle. The manager publishes that bundle in every
// namespace a cluster policy selects; a pod admitted before it is there waits for its volume.
func (h *PodInjector) governingBaseline(ctx context.Context, ns string, pod *corev1.Pod, g governing) (governing, *admission.Response) {
	opts, refused := h.canaryOptions(ctx)
	if refused != nil {
		return governing{}, refused
	}
	setLabel(pod, gatev1.LabelBaseline, "true")
	g.pod, g.options = pod, opts
	logf.FromContext(ctx).V(1).Info("governing a pod with the cluster baseline", "namespace", ns, "bundle", bootstrap.BaselineConfigMap, "clusterPolicies", clusterNames(g.clusters))
	return g, nil
}

func setLabel(pod *corev1.Pod, key, value string) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[key] = value
}

func clusterNames(cs []gatev1.ClusterHarnessAgentPolicy) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = "ClusterHarnessAgentPolicy " + c.Name
	}
	return strings.Join(names, ", ")
}

// describeLabels names the labels want has and have lacks or differs in.
func describeLabels(want, have map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if have[k] != want[k] {
			out = append(out, k+"="+want[k])
		}
	}
	return strings.Join(out, ", ")
}
