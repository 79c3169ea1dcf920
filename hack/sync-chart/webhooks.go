package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// webhooksTemplate is where the chart keeps the webhook configurations.
const webhooksTemplate = "templates/webhook-configurations.yaml"

const (
	// webhookService and operatorNamespace serve the webhooks in config/; in the chart the
	// release's webhook Service and namespace do.
	webhookService    = "gate-operator-webhook"
	operatorNamespace = "gate-system"
)

// webhookScope is which namespaces a webhook sees in the chart.
type webhookScope int

const (
	// everywhere: every namespace (config/ has no namespaceSelector, nor has the chart).
	everywhere webhookScope = iota
	// watched: the chart's watchNamespaces, when set (config/ has no namespaceSelector).
	watched
	// watchedPods: the chart's watchNamespaces, when set, and never the release namespace or
	// kube-system (config/ leaves out gate-system and kube-system).
	watchedPods
	// governed: every namespace but the release namespace and the chart's
	// admission.excludedNamespaces, whatever watchNamespaces says (config/ leaves out
	// excludedNamespaces).
	governed
)

// webhookScopes says, for each webhook of config/webhook/webhooks.yaml, which namespaces it sees
// in the chart. The policy webhooks and the pod injection follow watchNamespaces, as the manager
// reads policies there alone; the ToolApproval decision webhooks see every namespace, so that
// outside the served ones a decision is refused rather than written unrecorded. A webhook not
// named here is refused until it is.
var webhookScopes = map[string]webhookScope{
	"harnessagentpolicies.gate.intutic.io": watched,
	// Cluster-scoped: a namespaceSelector would not apply to it.
	"clusterharnessagentpolicies.gate.intutic.io": everywhere,
	"sessionconfirmers.gate.intutic.io":           watched,
	"pods.gate.intutic.io":                        watchedPods,
	"governed-pods.gate.intutic.io":               governed,
	"toolapprovals.gate.intutic.io":               everywhere,
	// An exception is judged (or refused) wherever it is written, as a decision is.
	"gateexceptions.gate.intutic.io": everywhere,
	// A cluster policy's ceiling governs pods wherever it selects, whatever watchNamespaces says
	// (a manager serving only some namespaces reads no cluster policies, and admits them all).
	"networkpolicies.gate.intutic.io": governed,
}

// podsNamespaceSelector is the namespaceSelector of the pod webhook in config/.
var podsNamespaceSelector = map[string]any{"matchExpressions": []any{map[string]any{
	"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{operatorNamespace, "kube-system"},
}}}

// excludedNamespaces are the namespaces config/ leaves out of the checks of governed pods (the
// governed-pods webhook and config/admission-policies); the chart leaves out its release
// namespace and admission.excludedNamespaces instead (gate-operator.governedNamespaceSelector).
var excludedNamespaces = []any{operatorNamespace, "kube-system", "kube-public", "kube-node-lease"}

// governedNamespaceSelector is the namespaceSelector of those checks in config/.
var governedNamespaceSelector = map[string]any{"matchExpressions": []any{map[string]any{
	"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excludedNamespaces,
}}}

// Placeholders in the marshalled webhooks, each replaced by its template line.
const (
	servicePlaceholder     = "__RELEASE_WEBHOOK_SERVICE__"
	namespacePlaceholder   = "__RELEASE_NAMESPACE__"
	timeoutPlaceholder     = "__WEBHOOK_TIMEOUT_SECONDS__"
	watchedPlaceholder     = "__WATCHED_NAMESPACES__"
	watchedPodsPlaceholder = "__WATCHED_NAMESPACES_PODS__"
	governedPlaceholder    = "__GOVERNED_NAMESPACES__"
)

// webhooksComment is what the chart says about its webhook configurations.
const webhooksComment = `{{- /*
The admission webhooks of config/webhook/webhooks.yaml (its comments say what each does), for the
release: served by its webhook Service in the release namespace, waited for
webhook.timeoutSeconds, the policy and pod webhooks limited to watchNamespaces when it is set
(the ToolApproval decision webhooks see every namespace: no decision is written unrecorded or
unauthorized, also outside watchNamespaces), the pod webhook never in the release namespace or
kube-system, the governed-pods and NetworkPolicy webhooks in every namespace but the release
namespace and admission.excludedNamespaces. caBundle is left out: the manager injects its own CA, or cert-manager's cainjector
does (webhook.certManager).
*/}}
{{- if .Values.webhook.enabled }}
{{- $service := include "gate-operator.webhookService" . }}
{{- $timeout := int .Values.webhook.timeoutSeconds }}
`

// webhooksMetadata follows the name and labels of each configuration.
const webhooksMetadata = `  {{- if .Values.webhook.certManager.enabled }}
  annotations:
    cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "gate-operator.fullname" . }}-webhook
  {{- end }}
`

// clusterPolicyConfigurationSuffix names the configurations the install creates empty and the
// manager fills with one pod entry per ClusterHarnessAgentPolicy (controllers
// ClusterPolicyWebhooksSuffix): the only ones allowed no webhooks.
const clusterPolicyConfigurationSuffix = "-cluster-policies"

func renderWebhooks(configDir, source string) ([]byte, error) {
	path := filepath.Join(configDir, source)
	docs, err := readDocs(path)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(generatedHeader(path))
	b.WriteString(webhooksComment)
	var timeout any
	for i, doc := range docs {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		kind, _ := obj["kind"].(string)
		if kind != "ValidatingWebhookConfiguration" && kind != "MutatingWebhookConfiguration" {
			return nil, fmt.Errorf("%s: unexpected %s: only webhook configurations are synced into the chart; extend hack/sync-chart", path, kind)
		}
		if unknown := otherKeys(obj, "apiVersion", "kind", "metadata", "webhooks"); len(unknown) > 0 {
			return nil, fmt.Errorf("%s: %s has %v, which hack/sync-chart does not know how to template", path, kind, unknown)
		}
		name, templateName, labelText, err := webhooksMeta(path, kind, obj)
		if err != nil {
			return nil, err
		}
		webhooks, _ := obj["webhooks"].([]any)
		if len(webhooks) == 0 && !strings.HasSuffix(name, clusterPolicyConfigurationSuffix) {
			return nil, fmt.Errorf("%s: %s %s has no webhooks", path, kind, name)
		}
		if webhooks == nil {
			webhooks = []any{} // rendered as webhooks: [], which the manager fills
		}
		for _, w := range webhooks {
			webhook, _ := w.(map[string]any)
			if err := templateWebhook(webhook, &timeout); err != nil {
				return nil, fmt.Errorf("%s: %s %s: %w", path, kind, name, err)
			}
		}
		body, err := yaml.Marshal(map[string]any{"webhooks": webhooks})
		if err != nil {
			return nil, err
		}
		if err := noTemplateDelimiters(path, body); err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "apiVersion: %v\nkind: %s\nmetadata:\n  name: %s\n", obj["apiVersion"], kind, templateName)
		b.WriteString(labelText)
		b.WriteString(webhooksMetadata)
		text, err := fillPlaceholders(string(body))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		b.WriteString(text)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no webhook configurations", path)
	}
	b.WriteString("{{- end }}\n")
	return b.Bytes(), nil
}

// webhooksMeta is a configuration's name in config/, its template in the chart, and the
// template of its labels.
func webhooksMeta(path, kind string, obj map[string]any) (name, templateName, labelText string, err error) {
	meta, _ := obj["metadata"].(map[string]any)
	if unknown := otherKeys(meta, "name", "labels"); len(unknown) > 0 {
		return "", "", "", fmt.Errorf("%s: %s metadata has %v, which hack/sync-chart does not know how to template", path, kind, unknown)
	}
	name, _ = meta["name"].(string)
	if templateName, err = releaseName(path, name); err != nil {
		return "", "", "", err
	}
	labels := map[string]string{}
	if l, ok := meta["labels"].(map[string]any); ok {
		for k, v := range l {
			labels[k] = fmt.Sprint(v)
		}
	}
	labelText, err = labelsTemplate(path, labels)
	return name, templateName, labelText, err
}

// templateWebhook puts placeholders where the chart's values go in one webhook of config/, and
// refuses what the chart could not reproduce. timeout is the timeoutSeconds of the webhooks
// seen so far: the chart sets one for all of them.
func templateWebhook(w map[string]any, timeout *any) error {
	name, _ := w["name"].(string)
	scope, known := webhookScopes[name]
	if !known {
		return fmt.Errorf("webhook %q: say in hack/sync-chart's webhookScopes which namespaces it sees in the chart", name)
	}
	cc, _ := w["clientConfig"].(map[string]any)
	if unknown := otherKeys(cc, "service"); len(unknown) > 0 {
		return fmt.Errorf("webhook %s: clientConfig has %v; the chart serves every webhook from its Service, and its CA is injected (no caBundle)", name, unknown)
	}
	svc, _ := cc["service"].(map[string]any)
	if svc["name"] != webhookService || svc["namespace"] != operatorNamespace {
		return fmt.Errorf("webhook %s: served by Service %v/%v, want %s/%s, which the chart replaces with its release's", name, svc["namespace"], svc["name"], operatorNamespace, webhookService)
	}
	svc["name"], svc["namespace"] = servicePlaceholder, namespacePlaceholder

	t, ok := w["timeoutSeconds"]
	if !ok {
		return fmt.Errorf("webhook %s: no timeoutSeconds; the chart sets webhook.timeoutSeconds on every webhook", name)
	}
	if *timeout != nil && !reflect.DeepEqual(t, *timeout) {
		return fmt.Errorf("webhook %s: timeoutSeconds %v, the others %v; the chart has one webhook.timeoutSeconds", name, t, *timeout)
	}
	*timeout = t
	w["timeoutSeconds"] = timeoutPlaceholder

	selector, hasSelector := w["namespaceSelector"]
	switch scope {
	case everywhere, watched:
		if hasSelector {
			return fmt.Errorf("webhook %s: namespaceSelector %v; in the chart it sees every namespace or watchNamespaces, not this", name, selector)
		}
		if scope == watched {
			w["namespaceSelector"] = watchedPlaceholder
		}
	case watchedPods:
		if !reflect.DeepEqual(selector, podsNamespaceSelector) {
			return fmt.Errorf("webhook %s: namespaceSelector %v, want %v (the chart leaves out the release namespace and kube-system)", name, selector, podsNamespaceSelector)
		}
		w["namespaceSelector"] = watchedPodsPlaceholder
	case governed:
		if !reflect.DeepEqual(selector, governedNamespaceSelector) {
			return fmt.Errorf("webhook %s: namespaceSelector %v, want %v (the chart leaves out the release namespace and admission.excludedNamespaces)", name, selector, governedNamespaceSelector)
		}
		w["namespaceSelector"] = governedPlaceholder
	}
	return nil
}

// fillPlaceholders replaces each placeholder line of the marshalled webhooks with its template.
func fillPlaceholders(body string) (string, error) {
	lines := strings.SplitAfter(body, "\n")
	for i, line := range lines {
		text := strings.TrimLeft(line, " ")
		indent := line[:len(line)-len(text)]
		selector := func(args string) string {
			return fmt.Sprintf("%[1]s{{- with include \"gate-operator.webhookNamespaceSelector\" (dict \"Values\" .Values \"Release\" .Release%[2]s) | trim }}\n"+
				"%[1]s{{- . | nindent %[3]d }}\n%[1]s{{- end }}\n", indent, args, len(indent))
		}
		switch strings.TrimSuffix(text, "\n") {
		case "name: " + servicePlaceholder:
			lines[i] = indent + "name: {{ $service }}\n"
		case "namespace: " + namespacePlaceholder:
			lines[i] = indent + "namespace: {{ .Release.Namespace }}\n"
		case "timeoutSeconds: " + timeoutPlaceholder:
			lines[i] = indent + "timeoutSeconds: {{ $timeout }}\n"
		case "namespaceSelector: " + watchedPlaceholder:
			lines[i] = selector("")
		case "namespaceSelector: " + watchedPodsPlaceholder:
			lines[i] = selector(` "pods" true`)
		case "namespaceSelector: " + governedPlaceholder:
			lines[i] = governedSelector(indent)
		}
	}
	out := strings.Join(lines, "")
	for _, p := range []string{servicePlaceholder, namespacePlaceholder, timeoutPlaceholder, watchedPlaceholder, watchedPodsPlaceholder, governedPlaceholder} {
		if strings.Contains(out, p) {
			return "", fmt.Errorf("%s is left in the chart's webhooks; hack/sync-chart marshals it where it does not look for it", p)
		}
	}
	return out, nil
}

// governedSelector is the template line of the namespaceSelector of the checks of governed pods.
func governedSelector(indent string) string {
	return fmt.Sprintf("%[1]snamespaceSelector:\n%[1]s  {{- include \"gate-operator.governedNamespaceSelector\" . | nindent %[2]d }}\n", indent, len(indent)+2)
}

// otherKeys lists, sorted, the keys of m not in known.
func otherKeys(m map[string]any, known ...string) []string {
	var other []string
	for k := range m {
		if !slices.Contains(known, k) {
			other = append(other, k)
		}
	}
	slices.Sort(other)
	return other
}
