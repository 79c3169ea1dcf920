package install_test

import (
	"slices"
	"strings"
	"testing"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/intutic/gate-operator/internal/webhook"
)

// TestWebhookConfigurations: the chart's webhook configurations, generated from config/webhook's
// (TestChartInSync), render for the default values to config/webhook's, labels aside (the
// templated names, namespaces, timeout and selectors reproduce it), and serve the paths
// internal/webhook registers; no caBundle is shipped (the
// manager injects its own CA); the pod webhook fails closed, reinvokes, and sees only labelled
// pods outside the operator's namespace and kube-system; the namespace policy webhooks fail
// open; the cluster policy webhook fails closed (a cluster policy that never compiled would block
// every pod it selects); the ToolApproval decision webhooks fail closed on every
// toolapprovals/status update, everywhere, and so do the GateException webhooks on every
// exception; the NetworkPolicy webhook fails closed, but only for NetworkPolicies with egress
// rules outside the excluded namespaces.
func TestWebhookConfigurations(t *testing.T) {
	kobjs, hobjs := kustomize(t), helmTemplate(t)
	kv, km := webhookConfigurations(t, kobjs)
	hv, hm := webhookConfigurations(t, hobjs)
	if !equality.Semantic.DeepEqual(kv.Webhooks, hv.Webhooks) || !equality.Semantic.DeepEqual(km.Webhooks, hm.Webhooks) {
		t.Errorf("the chart's webhook configurations differ from config/webhook:\nkustomize:\n%s%s\nhelm:\n%s%s",
			toYAML(t, kv.Webhooks), toYAML(t, km.Webhooks), toYAML(t, hv.Webhooks), toYAML(t, hm.Webhooks))
	}
	paths := map[string]string{}
	for _, w := range kv.Webhooks {
		if w.Name == approvals {
			checkApprovalWebhook(t, w.ClientConfig, w.Rules, *w.FailurePolicy, w.NamespaceSelector, w.ObjectSelector)
			paths["validating "+w.Name] = *w.ClientConfig.Service.Path
			continue
		}
		if w.Name == exceptions {
			checkExceptionWebhook(t, w.Name, *w.FailurePolicy, w.NamespaceSelector, w.ClientConfig.CABundle)
			paths["validating "+w.Name] = *w.ClientConfig.Service.Path
			continue
		}
		paths[w.Name] = *w.ClientConfig.Service.Path
		if w.Name == governedPods {
			checkGovernedPodsWebhook(t, w)
			continue
		}
		if w.Name == networkPolicies {
			checkNetworkPolicyWebhook(t, w)
			continue
		}
		if w.Name == clusterPolicies {
			if *w.FailurePolicy != admissionregv1.Fail || w.NamespaceSelector != nil || len(w.ClientConfig.CABundle) > 0 {
				t.Errorf("%s: failurePolicy %s, namespaceSelector %v, caBundle %d bytes; want Fail, none, none", w.Name, *w.FailurePolicy, w.NamespaceSelector, len(w.ClientConfig.CABundle))
			}
			continue
		}
		if *w.FailurePolicy != admissionregv1.Ignore {
			t.Errorf("%s failurePolicy %s, want Ignore (the controller's status is the safety net)", w.Name, *w.FailurePolicy)
		}
		if len(w.ClientConfig.CABundle) > 0 {
			t.Errorf("%s ships a caBundle", w.Name)
		}
	}
	if len(km.Webhooks) != 3 {
		t.Fatalf("%d mutating webhooks, want the pod, the decision and the exception webhooks", len(km.Webhooks))
	}
	pods, recorder, exceptionRecorder := km.Webhooks[0], km.Webhooks[1], km.Webhooks[2]
	paths[pods.Name] = *pods.ClientConfig.Service.Path
	paths["mutating "+recorder.Name] = *recorder.ClientConfig.Service.Path
	paths["mutating "+exceptionRecorder.Name] = *exceptionRecorder.ClientConfig.Service.Path
	checkExceptionWebhook(t, exceptionRecorder.Name, *exceptionRecorder.FailurePolicy, exceptionRecorder.NamespaceSelector, exceptionRecorder.ClientConfig.CABundle)
	checkApprovalWebhook(t, recorder.ClientConfig, recorder.Rules, *recorder.FailurePolicy, recorder.NamespaceSelector, recorder.ObjectSelector)
	if recorder.ReinvocationPolicy == nil || *recorder.ReinvocationPolicy != admissionregv1.IfNeededReinvocationPolicy {
		t.Errorf("%s reinvocationPolicy %v, want IfNeeded (it writes the decider back should a later webhook change it)", recorder.Name, recorder.ReinvocationPolicy)
	}
	want := map[string]string{
		"harnessagentpolicies.gate.intutic.io": webhook.PolicyPath,
		clusterPolicies:                        webhook.ClusterPolicyPath,
		"sessionconfirmers.gate.intutic.io":    webhook.ConfirmerPath,
		"pods.gate.intutic.io":                 webhook.PodPath,
		governedPods:                           webhook.PodValidatorPath,
		"validating " + approvals:              webhook.ApprovalValidatorPath,
		"mutating " + approvals:                webhook.ApprovalRecorderPath,
		"validating " + exceptions:             webhook.ExceptionValidatorPath,
		"mutating " + exceptions:               webhook.ExceptionRecorderPath,
		networkPolicies:                        webhook.NetworkPolicyPath,
	}
	if !equality.Semantic.DeepEqual(paths, want) {
		t.Errorf("webhook paths %v, want internal/webhook's %v", paths, want)
	}
	if *pods.FailurePolicy != admissionregv1.Fail || *pods.ReinvocationPolicy != admissionregv1.IfNeededReinvocationPolicy || len(pods.ClientConfig.CABundle) > 0 {
		t.Errorf("pod webhook: failurePolicy %s, reinvocationPolicy %s, caBundle %d bytes", *pods.FailurePolicy, *pods.ReinvocationPolicy, len(pods.ClientConfig.CABundle))
	}
	wantObjects := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gate.intutic.io/policy", Operator: metav1.LabelSelectorOpExists}}}
	wantNamespaces := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{namespace, "kube-system"}}}}
	if !equality.Semantic.DeepEqual(pods.ObjectSelector, wantObjects) || !equality.Semantic.DeepEqual(pods.NamespaceSelector, wantNamespaces) {
		t.Errorf("pod webhook selectors: objects %v, namespaces %v", pods.ObjectSelector, pods.NamespaceSelector)
	}
	for _, o := range append(ofKind(hobjs, "ValidatingWebhookConfiguration"), ofKind(hobjs, "MutatingWebhookConfiguration")...) {
		if len(o.GetAnnotations()) > 0 {
			t.Errorf("%s carries annotations %v without cert-manager", o.GetKind(), o.GetAnnotations())
		}
	}
	svc := find(t, hobjs, "Service", "gate-operator-webhook")
	if port, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports"); len(port) != 1 || port[0].(map[string]any)["targetPort"] != "webhook" {
		t.Errorf("webhook Service ports %v", port)
	}
	if s := find(t, hobjs, "Secret", "gate-operator-webhook-cert"); s.Object["data"] != nil {
		t.Errorf("the webhook Secret ships data")
	}

	t.Run("watchNamespaces", func(t *testing.T) {
		v, m := webhookConfigurations(t, helmTemplate(t, "--set", "watchNamespaces={a,b}"))
		in := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}
		for _, w := range v.Webhooks {
			if w.Name == governedPods {
				checkGovernedPodsWebhook(t, w) // every namespace but the excluded ones, whatever watchNamespaces says
				continue
			}
			if w.Name == networkPolicies {
				checkNetworkPolicyWebhook(t, w) // likewise
				continue
			}
			if w.Name == approvals || w.Name == exceptions || w.Name == clusterPolicies {
				// Fail closed everywhere: outside the served namespaces the manager may not review
				// approvers, so a decision there is refused rather than let through; an exception
				// likewise; and a cluster policy is cluster-scoped.
				if w.NamespaceSelector != nil {
					t.Errorf("%s namespaceSelector %v, want none", w.Name, w.NamespaceSelector)
				}
				continue
			}
			if w.NamespaceSelector == nil || !equality.Semantic.DeepEqual(w.NamespaceSelector.MatchExpressions, []metav1.LabelSelectorRequirement{in}) {
				t.Errorf("%s namespaceSelector %v, want only a and b", w.Name, w.NamespaceSelector)
			}
		}
		if got := m.Webhooks[0].NamespaceSelector.MatchExpressions; !equality.Semantic.DeepEqual(got, append([]metav1.LabelSelectorRequirement{in}, wantNamespaces.MatchExpressions...)) {
			t.Errorf("pod webhook namespaceSelector %v", got)
		}
	})

	t.Run("certManager", func(t *testing.T) {
		objs := helmTemplate(t, "--set", "webhook.certManager.enabled=true")
		checkRBAC(t, objs, rbacWant{prefix: "gate-operator", serviceAccount: "gate-operator", metricsAuth: true, clusterPolicyWebhooks: true})
		checkManagerPod(t, deployment(t, objs), managerWant{
			replicas: 2, leaderElect: true, image: defaultImage, confirmerImage: defaultConfirmerImage,
			webhooks:  []string{"--webhook-port=9443", "--webhook-certs=external", "--gate-hook-image=" + defaultConfirmerImage},
			resources: deployment(t, helmTemplate(t)).Spec.Template.Spec.Containers[0].Resources,
		})
		if s := ofKind(objs, "Secret"); len(s) != 0 {
			t.Errorf("cert-manager writes the Secret, but the chart renders %d", len(s))
		}
		for _, o := range append(ofKind(objs, "ValidatingWebhookConfiguration"), ofKind(objs, "MutatingWebhookConfiguration")...) {
			if got := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != namespace+"/gate-operator-webhook" {
				t.Errorf("%s inject-ca-from %q", o.GetKind(), got)
			}
		}
		cert := find(t, objs, "Certificate", "gate-operator-webhook")
		secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
		if secretName != "gate-operator-webhook-cert" || !slices.Contains(dns, "gate-operator-webhook."+namespace+".svc") || issuer != "gate-operator-webhook-ca" {
			t.Errorf("serving Certificate: secret %q, dnsNames %v, issuer %q", secretName, dns, issuer)
		}
		if isCA, _, _ := unstructured.NestedBool(find(t, objs, "Certificate", "gate-operator-webhook-ca").Object, "spec", "isCA"); !isCA {
			t.Errorf("the chart's CA Certificate is not a CA")
		}
		find(t, objs, "Issuer", "gate-operator-webhook-selfsigned")
		find(t, objs, "Issuer", "gate-operator-webhook-ca")

		objs = helmTemplate(t, "--set", "webhook.certManager.enabled=true", "--set", "webhook.certManager.issuerRef.name=corp-ca", "--set", "webhook.certManager.issuerRef.kind=ClusterIssuer")
		if n := len(ofKind(objs, "Issuer")) + len(ofKind(objs, "Certificate")); n != 1 {
			t.Errorf("with issuerRef the chart renders %d Issuers and Certificates, want the serving Certificate alone", n)
		}
		kind, _, _ := unstructured.NestedString(find(t, objs, "Certificate", "gate-operator-webhook").Object, "spec", "issuerRef", "kind")
		if kind != "ClusterIssuer" {
			t.Errorf("issuerRef kind %q", kind)
		}
	})

	t.Run("disabled", func(t *testing.T) {
		objs := helmTemplate(t, "--set", "webhook.enabled=false")
		for _, o := range objs {
			if strings.Contains(o.GetKind(), "Webhook") || strings.Contains(o.GetName(), "webhook") || o.GetKind() == "Secret" {
				t.Errorf("webhook.enabled false renders %s %s", o.GetKind(), o.GetName())
			}
		}
		checkRBAC(t, objs, rbacWant{prefix: "gate-operator", serviceAccount: "gate-operator", metricsAuth: true})
		checkManagerPod(t, deployment(t, objs), managerWant{
			replicas: 2, leaderElect: true, image: defaultImage, confirmerImage: defaultConfirmerImage, noWebhooks: true,
			resources: deployment(t, helmTemplate(t)).Spec.Template.Spec.Containers[0].Resources,
		})
	})
}

// approvals is the name of both ToolApproval decision webhooks.
const approvals = "toolapprovals.gate.intutic.io"

// checkApprovalWebhook: a decision webhook sees every status update of a ToolApproval, in every
// namespace, and fails closed.
func checkApprovalWebhook(t *testing.T, cc admissionregv1.WebhookClientConfig, rules []admissionregv1.RuleWithOperations, fp admissionregv1.FailurePolicyType, ns, objs *metav1.LabelSelector) {
	t.Helper()
	wantRules := []admissionregv1.RuleWithOperations{{
		Operations: []admissionregv1.OperationType{admissionregv1.Update},
		Rule: admissionregv1.Rule{APIGroups: []string{"gate.intutic.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"toolapprovals/status"},
			Scope: new(admissionregv1.NamespacedScope)},
	}}
	if fp != admissionregv1.Fail || !equality.Semantic.DeepEqual(rules, wantRules) || ns != nil || objs != nil || len(cc.CABundle) > 0 {
		t.Errorf("%s (%s): failurePolicy %s, rules %v, selectors %v %v; want Fail on every toolapprovals/status update", approvals, *cc.Service.Path, fp, rules, ns, objs)
	}
}

// webhookConfigurations returns the manager's own webhook configurations, and checks that the
// only others are the cluster policies' (<name>-cluster-policies), shipped empty: the manager
// fills them, one entry per cluster policy, and never creates them, so they go with the install.
func webhookConfigurations(t *testing.T, objs []*unstructured.Unstructured) (*admissionregv1.ValidatingWebhookConfiguration, *admissionregv1.MutatingWebhookConfiguration) {
	t.Helper()
	var own []*unstructured.Unstructured
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		var mine, cluster []*unstructured.Unstructured
		for _, o := range ofKind(objs, kind) {
			if strings.HasSuffix(o.GetName(), "-cluster-policies") {
				cluster = append(cluster, o)
			} else {
				mine = append(mine, o)
			}
		}
		if len(mine) != 1 || len(cluster) != 1 || cluster[0].GetName() != mine[0].GetName()+"-cluster-policies" {
			t.Fatalf("%d %ss of the manager and %d of the cluster policies, want one each, the second named after the first", len(mine), kind, len(cluster))
		}
		if hooks, found, _ := unstructured.NestedSlice(cluster[0].Object, "webhooks"); found && len(hooks) > 0 {
			t.Errorf("%s %s ships %d webhooks; the manager fills it, so it ships none", kind, cluster[0].GetName(), len(hooks))
		}
		own = append(own, mine[0])
	}
	return typed[admissionregv1.ValidatingWebhookConfiguration](t, own[0]), typed[admissionregv1.MutatingWebhookConfiguration](t, own[1])
}

// governedPods is the validating webhook that judges a labelled pod's final spec.
const governedPods = "governed-pods.gate.intutic.io"

// governedNamespaces is the namespaceSelector of the checks of governed pods with the chart's
// defaults: every namespace but the release namespace, kube-system, kube-public and
// kube-node-lease.
var governedNamespaces = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
	Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{namespace, "kube-system", "kube-public", "kube-node-lease"}}}}

// checkGovernedPodsWebhook: the validating pod webhook fails closed, sees only labelled pods at
// CREATE, in every namespace but the excluded ones.
func checkGovernedPodsWebhook(t *testing.T, w admissionregv1.ValidatingWebhook) {
	t.Helper()
	objects := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gate.intutic.io/policy", Operator: metav1.LabelSelectorOpExists}}}
	if *w.FailurePolicy != admissionregv1.Fail || !equality.Semantic.DeepEqual(w.ObjectSelector, objects) || !equality.Semantic.DeepEqual(w.NamespaceSelector, governedNamespaces) ||
		len(w.Rules) != 1 || !slices.Equal(w.Rules[0].Operations, []admissionregv1.OperationType{admissionregv1.Create}) || !slices.Equal(w.Rules[0].Resources, []string{"pods"}) {
		t.Errorf("%s: failurePolicy %s, objectSelector %v, namespaceSelector %v, rules %v", w.Name, *w.FailurePolicy, w.ObjectSelector, w.NamespaceSelector, w.Rules)
	}
}

// networkPolicies is the validating webhook that keeps NetworkPolicies within the egress
// ceilings of cluster policies.
const networkPolicies = "networkpolicies.gate.intutic.io"

// checkNetworkPolicyWebhook: the NetworkPolicy webhook fails closed on NetworkPolicy creates
// and updates, in every namespace but the excluded ones, and only for those with egress rules
// (its matchConditions), so an outage of the manager refuses nothing else.
func checkNetworkPolicyWebhook(t *testing.T, w admissionregv1.ValidatingWebhook) {
	t.Helper()
	wantRules := []admissionregv1.RuleWithOperations{{
		Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update},
		Rule: admissionregv1.Rule{APIGroups: []string{"networking.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"networkpolicies"},
			Scope: new(admissionregv1.NamespacedScope)},
	}}
	wantConditions := []admissionregv1.MatchCondition{{Name: "has-egress-rules", Expression: "has(object.spec.egress) && size(object.spec.egress) > 0"}}
	if *w.FailurePolicy != admissionregv1.Fail || !equality.Semantic.DeepEqual(w.Rules, wantRules) || !equality.Semantic.DeepEqual(w.NamespaceSelector, governedNamespaces) ||
		w.ObjectSelector != nil || !equality.Semantic.DeepEqual(w.MatchConditions, wantConditions) || len(w.ClientConfig.CABundle) > 0 {
		t.Errorf("%s: failurePolicy %s, rules %v, namespaceSelector %v, objectSelector %v, matchConditions %v, caBundle %d bytes",
			w.Name, *w.FailurePolicy, w.Rules, w.NamespaceSelector, w.ObjectSelector, w.MatchConditions, len(w.ClientConfig.CABundle))
	}
}

// TestAdmissionPolicies: the chart's ValidatingAdmissionPolicies and bindings, generated from
// config/admission-policies (TestChartInSync), render for the default values to config/'s,
// names and labels aside; each binding names its release's policy and denies; a binding scoped
// to governed namespaces leaves out the release namespace and admission.excludedNamespaces; the
// manager's user a policy names is the release's ServiceAccount in the release namespace.
func TestAdmissionPolicies(t *testing.T) {
	spec := func(objs []*unstructured.Unstructured, prefix string) map[string]any {
		out := map[string]any{}
		for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			for _, o := range ofKind(objs, kind) {
				s, _, _ := unstructured.NestedMap(o.Object, "spec")
				if p, ok := s["policyName"].(string); ok {
					s["policyName"] = strings.TrimPrefix(p, prefix)
				}
				out[kind+" "+strings.TrimPrefix(o.GetName(), prefix)] = s
			}
		}
		return out
	}
	k, h := spec(kustomize(t), "gate-operator"), spec(helmTemplate(t), "gate-operator")
	if len(k) == 0 || !equality.Semantic.DeepEqual(k, h) {
		t.Errorf("the chart's admission policies differ from config/admission-policies:\nkustomize:\n%s\nhelm:\n%s", toYAML(t, k), toYAML(t, h))
	}
	// managed-children names the manager's user in its expression and both messages.
	for _, tc := range []struct {
		name string
		args []string
		user string
	}{
		{"default values", nil, "system:serviceaccount:" + namespace + ":gate-operator"},
		{"another namespace and ServiceAccount", []string{"--namespace", "ops", "--set", "serviceAccount.name=gate-manager"}, "system:serviceaccount:ops:gate-manager"},
	} {
		p := find(t, helmTemplate(t, tc.args...), "ValidatingAdmissionPolicy", "gate-operator-managed-children")
		var policy admissionregv1.ValidatingAdmissionPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(p.Object, &policy); err != nil {
			t.Fatal(err)
		}
		if v := policy.Spec.Validations; len(v) != 1 || strings.Count(v[0].Expression, "'"+tc.user+"'") != 1 ||
			!strings.Contains(v[0].Message, tc.user) || !strings.Contains(v[0].MessageExpression, tc.user) {
			t.Errorf("%s: managed-children does not name the manager's user %s in its expression and messages: %+v", tc.name, tc.user, v)
		}
		if tc.args != nil && strings.Contains(toYAML(t, policy.Spec), namespace) {
			t.Errorf("%s: managed-children still names %s:\n%s", tc.name, namespace, toYAML(t, policy.Spec))
		}
	}

	objs := helmTemplate(t, "--set", "admission.excludedNamespaces={kube-system,platform}")
	bindings := ofKind(objs, "ValidatingAdmissionPolicyBinding")
	if len(bindings) == 0 {
		t.Fatal("no ValidatingAdmissionPolicyBinding rendered")
	}
	for _, b := range bindings {
		var binding admissionregv1.ValidatingAdmissionPolicyBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(b.Object, &binding); err != nil {
			t.Fatal(err)
		}
		if len(ofKind(objs, "ValidatingAdmissionPolicy")) == 0 || !slices.ContainsFunc(ofKind(objs, "ValidatingAdmissionPolicy"), func(p *unstructured.Unstructured) bool { return p.GetName() == binding.Spec.PolicyName }) {
			t.Errorf("binding %s names policy %q, which the chart does not render", binding.Name, binding.Spec.PolicyName)
		}
		if !slices.Equal(binding.Spec.ValidationActions, []admissionregv1.ValidationAction{admissionregv1.Deny}) {
			t.Errorf("binding %s validationActions %v, want [Deny]", binding.Name, binding.Spec.ValidationActions)
		}
		if mr := binding.Spec.MatchResources; mr != nil && mr.NamespaceSelector != nil {
			want := []string{namespace, "kube-system", "platform"}
			if e := mr.NamespaceSelector.MatchExpressions; len(e) != 1 || e[0].Operator != metav1.LabelSelectorOpNotIn || !slices.Equal(e[0].Values, want) {
				t.Errorf("binding %s namespaceSelector %v, want every namespace but %v", binding.Name, mr.NamespaceSelector, want)
			}
		}
	}
}

// The webhooks of cluster policies and of GateExceptions.
const (
	clusterPolicies = "clusterharnessagentpolicies.gate.intutic.io"
	exceptions      = "gateexceptions.gate.intutic.io"
)

// checkExceptionWebhook: an exception webhook fails closed in every namespace and ships no CA.
func checkExceptionWebhook(t *testing.T, name string, failurePolicy admissionregv1.FailurePolicyType, namespaces *metav1.LabelSelector, caBundle []byte) {
	t.Helper()
	if failurePolicy != admissionregv1.Fail || namespaces != nil || len(caBundle) > 0 {
		t.Errorf("%s: failurePolicy %s, namespaceSelector %v, caBundle %d bytes; want Fail, none, none", name, failurePolicy, namespaces, len(caBundle))
	}
}
