package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/confirmerconfig"
)

// PodInjector governs the pods created with the label gate.intutic.io/policy: <name> by adding
// what docs/examples/sandbox-pod.yaml adds by hand (Inject). A pod whose label names no
// HarnessAgentPolicy in its namespace is refused, so no pod that asked to be governed starts
// without the gate.
//
// With ClusterPolicies, it also governs the pods a ClusterHarnessAgentPolicy selects, labelled
// or not (the manager's webhook entry per cluster policy sends them): an unlabelled one is
// governed by the one namespace policy whose podSelector selects it (the injection labels it
// for that policy), or, with none, by the namespace's baseline bundle (bootstrap.BaselineConfigMap:
// the cluster layers alone, and labelled gate.intutic.io/baseline so the baseline's egress
// NetworkPolicy selects it). docs/fleet.md says why no pod a cluster policy selects can opt out.
type PodInjector struct {
	// Reader reads policies from the API server, never a cache: a policy applied a moment before
	// its pods must be found. It also reads the egress canary's Service, at every admission, for
	// the ClusterIP the pod's egress-wait dials (a deny-all pod cannot use DNS).
	Reader  client.Reader
	Options InjectOptions
	// ClusterPolicies makes the injection read ClusterHarnessAgentPolicies: a manager serving
	// only some namespaces reads none.
	ClusterPolicies bool
}

var _ admission.Handler = (*PodInjector)(nil)

// Handle implements admission.Handler.
func (h *PodInjector) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	g, refused := h.governing(ctx, req)
	if refused != nil {
		return *refused
	}
	pod := g.pod
	before, err := json.Marshal(g.decoded)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	warnings, err := g.inject(pod)
	if conflict := (*ConflictError)(nil); errors.As(err, &conflict) {
		return admission.Denied(fmt.Sprintf("the pod cannot be governed by %s: %s", g, conflict.Reason))
	} else if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if g.policy != nil {
		warnings = append(warnings, policyWarnings(g.policy, pod)...)
	}
	setAnnotation(pod, gatev1.AnnotationInjection, RenderDigest(g.options))
	if equality.Semantic.DeepEqual(g.decoded, pod) {
		return admission.Allowed("already governed").WithWarnings(warnings...)
	}
	after, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	// The patch is the difference between the pod as decoded and as injected, both encoded the
	// same way, so it holds only what the injection changed (labels included).
	return admission.PatchResponseFromRaw(before, after).WithWarnings(warnings...)
}

// governing is what governs a pod: the pod (with the labels the injection gives it) and the
// pod as decoded, the policy its label names (read from the API server) or, for the baseline,
// none, the cluster policies selecting it, and the injection's options with the egress
// canary's ClusterIP; or the response that refuses it (or, for a pod no policy governs,
// allows it).
type governing struct {
	pod, decoded *corev1.Pod
	policy       *gatev1.HarnessAgentPolicy // nil: the namespace's baseline bundle
	clusters     []gatev1.ClusterHarnessAgentPolicy
	options      InjectOptions
}

// String names what governs the pod, for refusals.
func (g governing) String() string {
	if g.policy == nil {
		return "the cluster baseline of " + clusterNames(g.clusters) + " (ConfigMap " + bootstrap.BaselineConfigMap + ")"
	}
	return "HarnessAgentPolicy " + g.policy.Name
}

// inject renders the injection into pod (Inject or InjectBaseline).
func (g governing) inject(pod *corev1.Pod) ([]string, error) {
	if g.policy == nil {
		return InjectBaseline(pod, g.options)
	}
	return Inject(pod, g.policy.Name, g.options)
}

// governed judges pod's final spec (Governed or GovernedBaseline).
func (g governing) governed(pod *corev1.Pod) error {
	if g.policy == nil {
		return GovernedBaseline(pod, g.options)
	}
	return Governed(pod, g.policy.Name, g.options)
}

func (h *PodInjector) governing(ctx context.Context, req admission.Request) (governing, *admission.Response) {
	refuse := func(r admission.Response) (governing, *admission.Response) { return governing{}, &r }
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return refuse(admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod: %w", err)))
	}
	g := governing{decoded: pod.DeepCopy()}
	ns := req.Namespace
	var err error
	if g.clusters, err = h.selectingClusterPolicies(ctx, ns, pod); err != nil {
		logf.FromContext(ctx).Error(err, "reading the ClusterHarnessAgentPolicies that may select a pod", "namespace", ns)
		return refuse(admission.Errored(http.StatusInternalServerError, fmt.Errorf("the ClusterHarnessAgentPolicies could not be read, so the pod cannot be governed: %w", err)))
	}
	if refusal := skipRefusal(pod, g.clusters); refusal != "" {
		return refuse(admission.Denied(refusal))
	}
	name, labelled := pod.Labels[gatev1.LabelPolicy]
	if !labelled {
		if len(g.clusters) == 0 {
			// The webhooks' selectors send labelled pods and those a cluster policy selects;
			// anything else is not ours.
			return refuse(admission.Allowed(""))
		}
		var refusal string
		if name, refusal, err = h.namespacePolicyOf(ctx, ns, pod); err != nil {
			logf.FromContext(ctx).Error(err, "reading the HarnessAgentPolicies of a namespace", "namespace", ns)
			return refuse(admission.Errored(http.StatusInternalServerError, fmt.Errorf("the HarnessAgentPolicies of namespace %s could not be read, so the pod cannot be governed", ns)))
		}
		if refusal != "" {
			return refuse(admission.Denied(refusal))
		}
		if name == "" {
			return h.governingBaseline(ctx, ns, pod, g)
		}
		// Governed by the namespace policy that selects it, as if the pod had asked for it.
		setLabel(pod, gatev1.LabelPolicy, name)
	}
	// A pod a namespace policy governs is no baseline pod: the baseline's egress NetworkPolicy
	// must not select it too (NetworkPolicy allows add up).
	delete(pod.Labels, gatev1.LabelBaseline)
	if errs := validationErrors(name); errs != "" {
		return refuse(admission.Denied(fmt.Sprintf("label %s=%q names no HarnessAgentPolicy: %s", gatev1.LabelPolicy, name, errs)))
	}
	policy := &gatev1.HarnessAgentPolicy{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, policy); err != nil {
		if apierrors.IsNotFound(err) {
			return refuse(admission.Denied(fmt.Sprintf("the pod's label %s names HarnessAgentPolicy %q, which does not exist in namespace %s: apply the policy first, or fix the label",
				gatev1.LabelPolicy, name, ns)))
		}
		logf.FromContext(ctx).Error(err, "reading the HarnessAgentPolicy a pod names", "namespace", ns, "policy", name)
		return refuse(admission.Errored(http.StatusInternalServerError, fmt.Errorf("HarnessAgentPolicy %s/%s could not be read, so the pod cannot be governed", ns, name)))
	}
	opts, refused := h.canaryOptions(ctx)
	if refused != nil {
		return governing{}, refused
	}
	if policy.Spec.GateAgent != nil {
		opts.GateAgentResources = policy.Spec.GateAgent.Resources
		if ha := policy.Spec.GateAgent.HumanApproval; ha != nil {
			lane, refused := h.humanLane(ctx, ns, ha.Confirmer)
			if refused != nil {
				return governing{}, refused
			}
			opts.HumanLane = lane
		}
	}
	g.pod, g.policy, g.options = pod, policy, opts
	return g, nil
}

// canaryOptions are the injection's options with the egress canary's ClusterIP
// (resolveCanary), or the response that refuses the pod when the Service cannot give one.
func (h *PodInjector) canaryOptions(ctx context.Context) (InjectOptions, *admission.Response) {
	opts, refusal, err := h.resolveCanary(ctx)
	if err != nil {
		logf.FromContext(ctx).Error(err, "reading the egress canary Service")
		c := opts.EgressCanary
		r := admission.Errored(http.StatusInternalServerError, fmt.Errorf("the egress canary Service %s/%s could not be read, so the pod cannot be governed", c.Namespace, c.Service))
		return opts, &r
	}
	if refusal != "" {
		r := admission.Denied("the pod cannot be governed: " + refusal)
		return opts, &r
	}
	return opts, nil
}

// PodValidator admits a labelled pod only if its final spec, after every mutating webhook and
// the API server's defaults, is what the injection renders for it (Governed): a pod labelled
// by a webhook that runs after ours, one created where the pod webhook does not serve, or one
// another webhook changed after ours is refused, not run half governed. It shares
// PodInjector's reads, so a pod it admits has the policy and canary address it was injected with.
type PodValidator struct{ Injector *PodInjector }

var _ admission.Handler = (*PodValidator)(nil)

// Handle implements admission.Handler.
func (v *PodValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	g, refused := v.Injector.governing(ctx, req)
	if refused != nil {
		return *refused
	}
	if !equality.Semantic.DeepEqual(g.pod.Labels, g.decoded.Labels) {
		// The injection labels what it governs; a pod that reaches this check without those
		// labels was not injected.
		return admission.Denied(fmt.Sprintf("the pod is governed by %s but lacks the labels the injection gives it (%s): it was not injected", g, describeLabels(g.pod.Labels, g.decoded.Labels)))
	}
	if err := g.governed(g.pod); err != nil {
		if g.policy != nil {
			return admission.Denied(fmt.Sprintf("the pod carries label %s=%s but is not governed as the injection renders it: %s", gatev1.LabelPolicy, g.policy.Name, err))
		}
		return admission.Denied(fmt.Sprintf("the pod is selected by %s but is not governed as the injection renders it: %s", clusterNames(g.clusters), err))
	}
	return admission.Allowed("governed")
}

// resolveCanary is h.Options with the egress canary's Host set to its Service's ClusterIP, read
// from the API server. A Service that is missing, headless or without a ClusterIP refuses the
// pod (refusal says why); an error reading it is err.
func (h *PodInjector) resolveCanary(ctx context.Context) (o InjectOptions, refusal string, err error) {
	o = h.Options
	o.EgressCanary = o.egressCanary()
	c := o.EgressCanary
	ip, clusterIP, err := h.clusterIP(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Service})
	switch {
	case apierrors.IsNotFound(err):
		return o, fmt.Sprintf("the manager's egress canary Service %s/%s does not exist, and the pod's wait-for-egress-policy needs its ClusterIP: install the operator whole (docs/install.md)", c.Namespace, c.Service), nil
	case err != nil:
		return o, "", err
	case ip == nil:
		return o, fmt.Sprintf("the manager's egress canary Service %s/%s has no ClusterIP (%q; a headless Service has none), and the pod's wait-for-egress-policy dials it: it must be of type ClusterIP", c.Namespace, c.Service, clusterIP), nil
	}
	o.EgressCanary.Host = ip.String()
	return o, "", nil
}

// The pod webhook reads a SessionConfirmer's Service for a policy's human lane.
// +kubebuilder:rbac:groups="",resources=services,verbs=get

// humanLane is the human lane of a policy's pods (spec.gateAgent.humanApproval): its
// SessionConfirmer's gate API by the Service's ClusterIP, as for the egress canary (a deny-all
// pod has no DNS; its egress policy allows the confirmer's pods on the API port), and the
// confirmer's token audience. A Service that does not exist yet refuses the pod, as a missing
// policy does: its calls would otherwise wait for a human no confirmer could ask.
func (h *PodInjector) humanLane(ctx context.Context, ns, confirmer string) (*HumanLane, *admission.Response) {
	name := confirmerconfig.ServiceName(confirmer)
	ip, _, err := h.clusterIP(ctx, client.ObjectKey{Namespace: ns, Name: name})
	var r admission.Response
	switch {
	case apierrors.IsNotFound(err):
		r = admission.Denied(fmt.Sprintf("the policy's spec.gateAgent.humanApproval names SessionConfirmer %q, whose Service %s/%s does not exist: apply the SessionConfirmer first", confirmer, ns, name))
	case err != nil:
		logf.FromContext(ctx).Error(err, "reading a SessionConfirmer's Service", "namespace", ns, "service", name)
		r = admission.Errored(http.StatusInternalServerError, fmt.Errorf("the Service %s/%s of the SessionConfirmer the policy's spec.gateAgent.humanApproval names could not be read, so the pod cannot be governed", ns, name))
	case ip == nil:
		r = admission.Denied(fmt.Sprintf("the Service %s/%s of SessionConfirmer %q has no ClusterIP, which the pod's gate-agent dials", ns, name, confirmer))
	default:
		return &HumanLane{URL: "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(confirmerconfig.ServicePort)), Audience: confirmerconfig.TokenAudience(ns, confirmer)}, nil
	}
	return nil, &r
}

// clusterIP reads the ClusterIP of the Service key, which the injected containers dial rather
// than its DNS name (a deny-all pod has no DNS): the address, or nil and the Service's
// spec.clusterIP as it stands when that is no address (a headless Service); the read's error,
// NotFound included, when the Service cannot be read.
func (h *PodInjector) clusterIP(ctx context.Context, key client.ObjectKey) (net.IP, string, error) {
	svc := &corev1.Service{}
	if err := h.Reader.Get(ctx, key, svc); err != nil {
		return nil, "", err
	}
	return net.ParseIP(svc.Spec.ClusterIP), svc.Spec.ClusterIP, nil
}

// validationErrors says why name cannot be an object's name, or "".
func validationErrors(name string) string {
	return strings.Join(validation.IsDNS1123Subdomain(name), "; ")
}

// policyWarnings are what the pod's author should know about the policy that governs it.
func policyWarnings(p *gatev1.HarnessAgentPolicy, pod *corev1.Pod) []string {
	var out []string
	if p.DeletionTimestamp != nil {
		out = append(out, fmt.Sprintf("HarnessAgentPolicy %s is being deleted: its bootstrap ConfigMap goes with it, and the pod cannot start without it", p.Name))
	}
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	if err == nil && !sel.Matches(labels.Set(pod.Labels)) {
		out = append(out, fmt.Sprintf("the pod's labels do not match spec.podSelector of HarnessAgentPolicy %s (%s): its hook is injected, but its egress NetworkPolicy does not select the pod", p.Name, sel))
	}
	return out
}
