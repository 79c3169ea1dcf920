package controllers

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// +kubebuilder:rbac:groups=openreports.io,resources=reports,verbs=get;list;watch;create;update;delete

// ReportName is the name of the posture Report the manager keeps in each governed namespace.
const ReportName = "gate-operator"

// Checks of the posture Report (its results' rule), and the source it names.
const (
	reportSource         = "gate-operator"
	checkPolicyReady     = "policy-ready"
	checkEgressNarrow    = "egress-not-widened"
	checkPodGoverned     = "pod-governed"
	checkPodCurrent      = "pod-injection-current"
	checkExceptionExpiry = "exception-expiring"
)

// Defaults of ReportReconciler.
const (
	DefaultReportMaxResults       = 100
	DefaultExceptionExpiryWarning = 24 * time.Hour
)

// ReportReconciler keeps one OpenReports Report (openreports.io/v1alpha1, named ReportName) per
// namespace that a HarnessAgentPolicy governs, a ClusterHarnessAgentPolicy selects or a
// SessionConfirmer runs in, with what the manager can observe of that namespace's posture now:
// pods a policy selects that do not run its hook (never injected: created before the policy or
// with the webhooks off) or that were injected by another rendering, policies and cluster
// layers not Ready, other NetworkPolicies that widen a governed pod's egress, exceptions about
// to expire, and the Managed Agents tools its SessionConfirmers' agents run under always_allow
// (report_agents.go). It is the current state only, never history (the decision trail is the
// history), and bounded: at most MaxResults results, failures first; the summary counts them
// all.
type ReportReconciler struct {
	Client client.Client
	// APIReader reads the SessionConfirmers' API key Secrets past the cache, to look their
	// agents up; without it the agents are not reported.
	APIReader client.Reader
	// HTTPClient sends the agent lookups; a client of its own when nil.
	HTTPClient *http.Client
	// RenderDigest is what the pod webhook stamps on the pods it injects now
	// (webhook.RenderDigest of the manager's injection options).
	RenderDigest string
	// ClusterPolicies: cluster policies are read (the manager serves every namespace).
	ClusterPolicies bool
	MaxResults      int
	// ExpiryWarning is how long before its expiry an exception is reported.
	ExpiryWarning time.Duration
	Clock         clock.PassiveClock

	agents agentCache
}

// Reconcile rebuilds the Report of the namespace req.Name.
func (r *ReportReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := req.Name
	var nsLabels map[string]string
	if r.ClusterPolicies {
		// Only a manager serving every namespace may read them (and needs their labels).
		nsMeta := &metav1.PartialObjectMetadata{}
		nsMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		if err := r.Client.Get(ctx, types.NamespacedName{Name: ns}, nsMeta); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if nsMeta.DeletionTimestamp != nil {
			return ctrl.Result{}, nil
		}
		nsLabels = nsMeta.Labels
	}
	in, err := r.observe(ctx, ns, nsLabels)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(in.policies) == 0 && len(in.clusters) == 0 && len(in.confirmers) == 0 {
		return ctrl.Result{}, r.deleteReport(ctx, ns)
	}
	results, requeue := r.results(in)
	agentResults, agentRequeue := r.agentResults(ctx, in)
	if agentRequeue > 0 && (requeue == 0 || agentRequeue < requeue) {
		requeue = agentRequeue
	}
	return ctrl.Result{RequeueAfter: requeue}, r.apply(ctx, ns, append(results, agentResults...))
}

// observed is what one namespace's Report is built from.
type observed struct {
	namespace  string
	policies   []gatev1.HarnessAgentPolicy
	clusters   []gatev1.ClusterHarnessAgentPolicy // those selecting the namespace
	exceptions []gatev1.GateException
	confirmers []gatev1.SessionConfirmer
	pods       []metav1.PartialObjectMetadata
	now        time.Time
}

func (r *ReportReconciler) observe(ctx context.Context, ns string, nsLabels map[string]string) (*observed, error) {
	in := &observed{namespace: ns, now: r.Clock.Now()}
	var policies gatev1.HarnessAgentPolicyList
	if err := r.Client.List(ctx, &policies, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	in.policies = slices.DeleteFunc(policies.Items, func(p gatev1.HarnessAgentPolicy) bool { return p.DeletionTimestamp != nil })
	if r.ClusterPolicies && !slices.Contains(gatev1.SystemNamespaces, ns) {
		var clusters gatev1.ClusterHarnessAgentPolicyList
		if err := r.Client.List(ctx, &clusters); err != nil {
			return nil, err
		}
		for _, c := range clusters.Items {
			sel, err := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector)
			if c.DeletionTimestamp == nil && err == nil && sel.Matches(labels.Set(nsLabels)) {
				in.clusters = append(in.clusters, c)
			}
		}
	}
	var exceptions gatev1.GateExceptionList
	if err := r.Client.List(ctx, &exceptions, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	in.exceptions = exceptions.Items
	var confirmers gatev1.SessionConfirmerList
	if err := r.Client.List(ctx, &confirmers, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	in.confirmers = slices.DeleteFunc(confirmers.Items, func(sc gatev1.SessionConfirmer) bool { return sc.DeletionTimestamp != nil })
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := r.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	in.pods = pods.Items
	return in, nil
}

// results are the Report's results, unsorted, and when to look again for an exception crossing
// into or out of the warning window (0: never).
func (r *ReportReconciler) results(in *observed) ([]reportsv1alpha1.ReportResult, time.Duration) {
	var out []reportsv1alpha1.ReportResult
	for _, p := range in.policies {
		ref := objectRef("HarnessAgentPolicy", in.namespace, p.Name, p.UID)
		out = append(out, readiness("HarnessAgentPolicy/"+p.Name, ref, p.Status.Conditions, p.Generation))
		if c := meta.FindStatusCondition(p.Status.Conditions, gatev1.ConditionEgressEnforced); c != nil && c.Reason == gatev1.ReasonShadowedByPolicy {
			out = append(out, result("HarnessAgentPolicy/"+p.Name, checkEgressNarrow, reportsv1alpha1.Result("fail"), "high", c.Message, ref))
		}
	}
	for _, c := range in.clusters {
		out = append(out, readiness("ClusterHarnessAgentPolicy/"+c.Name, objectRef("ClusterHarnessAgentPolicy", "", c.Name, c.UID), c.Status.Conditions, c.Generation))
	}
	out = append(out, r.podResults(in)...)
	var requeue time.Duration
	later := func(d time.Duration) {
		if d > 0 && (requeue == 0 || d < requeue) {
			requeue = d
		}
	}
	for _, e := range in.exceptions {
		if e.Status.Phase != gatev1.ExceptionActive {
			continue
		}
		left := e.Spec.ExpiresAt.Sub(in.now)
		if left > r.ExpiryWarning {
			later(left - r.ExpiryWarning)
			continue
		}
		later(left)
		out = append(out, result(string(e.Spec.PolicyRef.Kind)+"/"+e.Spec.PolicyRef.Name, checkExceptionExpiry, "warn", "low",
			fmt.Sprintf("GateException %s lifts rules %s until %s (in %s); renew it or let it expire", e.Name, joinRules(e.Spec.Rules),
				e.Spec.ExpiresAt.UTC().Format(time.RFC3339), left.Round(time.Minute)),
			objectRef("GateException", in.namespace, e.Name, e.UID)))
	}
	return out, requeue
}

// podResults: a failure for each pod a policy selects that was never injected, a warning for
// each injected by another rendering, and one pass counting the pods that run the current one.
func (r *ReportReconciler) podResults(in *observed) []reportsv1alpha1.ReportResult {
	var out []reportsv1alpha1.ReportResult
	current := 0
	for i := range in.pods {
		pod := &in.pods[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		by := selectedBy(pod.Labels, in)
		if by == "" {
			continue
		}
		ref := objectRef("Pod", in.namespace, pod.Name, pod.UID)
		switch digest, injected := pod.Annotations[gatev1.AnnotationInjection]; {
		case !injected:
			out = append(out, result(by, checkPodGoverned, "fail", "high", fmt.Sprintf(
				"pod %s is selected by %s and does not run its hook: it was admitted without the injection (created before the policy, or with the webhooks off); delete it so that its controller creates it again, governed",
				pod.Name, by), ref))
		case digest != r.RenderDigest:
			out = append(out, result(by, checkPodCurrent, "warn", "medium", fmt.Sprintf(
				"pod %s was injected by another rendering of gate-operator (%s, now %s): its hook and sidecar are of that version until it is created again",
				pod.Name, digest, r.RenderDigest), ref))
		default:
			current++
		}
	}
	if current > 0 {
		out = append(out, result("", checkPodGoverned, "pass", "", fmt.Sprintf("pods the policies select that run the current injection: %d", current)))
	}
	return out
}

// selectedBy names what governs a pod with these labels in the namespace, "" for nothing: the
// policy its gatev1.LabelPolicy names, else the namespace policy whose podSelector selects it,
// else the cluster policies that select it.
func selectedBy(podLabels map[string]string, in *observed) string {
	if name, ok := podLabels[gatev1.LabelPolicy]; ok {
		return "HarnessAgentPolicy/" + name
	}
	for _, p := range in.policies {
		if sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector); err == nil && !sel.Empty() && sel.Matches(labels.Set(podLabels)) {
			return "HarnessAgentPolicy/" + p.Name
		}
	}
	var names []string
	for _, c := range in.clusters {
		if sel, err := metav1.LabelSelectorAsSelector(&c.Spec.PodSelector); err == nil && sel.Matches(labels.Set(podLabels)) {
			names = append(names, "ClusterHarnessAgentPolicy/"+c.Name)
		}
	}
	return strings.Join(names, ", ")
}

// readiness is a policy's Ready condition as a result: a pass, or a failure with its message.
func readiness(policy string, ref corev1.ObjectReference, conds []metav1.Condition, generation int64) reportsv1alpha1.ReportResult {
	c := meta.FindStatusCondition(conds, gatev1.ConditionReady)
	switch {
	case c == nil:
		return result(policy, checkPolicyReady, "fail", "high", policy+" has no Ready condition yet: the manager has not reconciled it", ref)
	case c.Status != metav1.ConditionTrue:
		return result(policy, checkPolicyReady, "fail", "high", fmt.Sprintf("%s is not Ready (%s): %s", policy, c.Reason, c.Message), ref)
	case c.ObservedGeneration != generation:
		return result(policy, checkPolicyReady, "warn", "medium", fmt.Sprintf("%s is Ready for generation %d, not yet for its generation %d", policy, c.ObservedGeneration, generation), ref)
	}
	return result(policy, checkPolicyReady, "pass", "", policy+" is Ready", ref)
}

func result(policy, rule string, res reportsv1alpha1.Result, severity reportsv1alpha1.ResultSeverity, msg string, subjects ...corev1.ObjectReference) reportsv1alpha1.ReportResult {
	return reportsv1alpha1.ReportResult{Source: reportSource, Policy: cmp.Or(policy, "gate-operator"), Rule: rule, Result: res, Severity: severity,
		Description: msg, Subjects: subjects}
}

func objectRef(kind, ns, name string, uid types.UID) corev1.ObjectReference {
	apiVersion := gatev1.GroupVersion.String()
	if kind == "Pod" {
		apiVersion = "v1"
	}
	return corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name, UID: uid}
}

func joinRules(rules []gatev1.RuleName) string {
	s := make([]string, len(rules))
	for i, r := range rules {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// resultOrder puts failures first, then errors, warnings, passes; then by policy, rule, subject
// and message (a SessionConfirmer has a result per agent), so that the order is the same each
// time.
var resultOrder = map[reportsv1alpha1.Result]int{"fail": 0, "error": 1, "warn": 2, "pass": 3, "skip": 4}

// apply writes the namespace's Report: results sorted and bounded, the summary of all of them.
// It writes only when the results changed, so the results' timestamps say when they last did.
func (r *ReportReconciler) apply(ctx context.Context, ns string, results []reportsv1alpha1.ReportResult) error {
	slices.SortFunc(results, func(a, b reportsv1alpha1.ReportResult) int {
		return cmp.Or(cmp.Compare(resultOrder[a.Result], resultOrder[b.Result]), strings.Compare(a.Policy, b.Policy), strings.Compare(a.Rule, b.Rule),
			strings.Compare(subjectName(a), subjectName(b)), strings.Compare(a.Description, b.Description))
	})
	var summary reportsv1alpha1.ReportSummary
	for _, res := range results {
		switch res.Result {
		case "pass":
			summary.Pass++
		case "fail":
			summary.Fail++
		case "warn":
			summary.Warn++
		case "error":
			summary.Error++
		}
	}
	if len(results) > r.MaxResults {
		results = results[:r.MaxResults]
	}
	now := metav1.Timestamp{Seconds: r.Clock.Now().Unix()}
	for i := range results {
		results[i].Timestamp = now
	}
	report := &reportsv1alpha1.Report{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ReportName}, report)
	if apierrors.IsNotFound(err) {
		report = &reportsv1alpha1.Report{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ReportName,
			Labels: map[string]string{gatev1.LabelManagedBy: gatev1.ManagedByValue}}}
		r.fill(report, summary, results)
		return r.Client.Create(ctx, report)
	}
	if err != nil {
		return err
	}
	if sameResults(report.Results, results) && report.Summary == summary && report.Source == reportSource {
		return nil
	}
	r.fill(report, summary, results)
	return r.Client.Update(ctx, report)
}

func (r *ReportReconciler) fill(report *reportsv1alpha1.Report, summary reportsv1alpha1.ReportSummary, results []reportsv1alpha1.ReportResult) {
	report.Source, report.Summary, report.Results = reportSource, summary, results
	report.Configuration = &reportsv1alpha1.ReportConfiguration{Limits: reportsv1alpha1.Limits{MaxResults: r.MaxResults}}
}

// sameResults compares results without their timestamps.
func sameResults(a, b []reportsv1alpha1.ReportResult) bool {
	strip := func(rs []reportsv1alpha1.ReportResult) []reportsv1alpha1.ReportResult {
		out := slices.Clone(rs)
		for i := range out {
			out[i].Timestamp = metav1.Timestamp{}
		}
		return out
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

func subjectName(r reportsv1alpha1.ReportResult) string {
	if len(r.Subjects) == 0 {
		return ""
	}
	return r.Subjects[0].Kind + "/" + r.Subjects[0].Name
}

func (r *ReportReconciler) deleteReport(ctx context.Context, ns string) error {
	report := &reportsv1alpha1.Report{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ReportName}}
	return client.IgnoreNotFound(r.Client.Delete(ctx, report))
}

// SetupWithManager registers the controller: a namespace is reconciled when its pods (metadata:
// created, deleted, labels or annotations changed), policies, exceptions, SessionConfirmers
// (created, deleted, spec changed) or Report change; with ClusterPolicies also when its labels
// change, and every namespace when a cluster policy does.
func (r *ReportReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.MaxResults <= 0 {
		r.MaxResults = DefaultReportMaxResults
	}
	if r.ExpiryWarning <= 0 {
		r.ExpiryWarning = DefaultExceptionExpiryWarning
	}
	if r.HTTPClient == nil {
		r.HTTPClient = defaultAgentsHTTPClient()
	}
	ofNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("posture-report").
		WatchesMetadata(&corev1.Pod{}, ofNamespace, builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}, createdOrDeleted()))).
		Watches(&gatev1.HarnessAgentPolicy{}, ofNamespace).
		Watches(&gatev1.GateException{}, ofNamespace).
		Watches(&gatev1.SessionConfirmer{}, ofNamespace, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&reportsv1alpha1.Report{}, ofNamespace, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == ReportName })))
	if r.ClusterPolicies {
		b = b.Watches(&gatev1.ClusterHarnessAgentPolicy{}, handler.EnqueueRequestsFromMapFunc(r.allNamespaces)).
			WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
			}), builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, createdOrDeleted())))
	}
	return b.Complete(r)
}

// allNamespaces enqueues every namespace: a cluster policy's change may add or remove any.
func (r *ReportReconciler) allNamespaces(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := r.Client.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing namespaces for their posture Reports")
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, ns := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: ns.Name}}
	}
	return out
}

// createdOrDeleted passes creations and deletions, not updates.
func createdOrDeleted() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return true },
	}
}
