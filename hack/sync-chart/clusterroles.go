package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	// managerRoleName is the ClusterRole controller-gen writes (`rbac:roleName=` in the Makefile).
	managerRoleName = "gate-operator-manager"
	// approverRoleName is the ClusterRole of config/rbac/approver_role.yaml.
	approverRoleName = "gate-operator-approver"
	// approverTemplate is where the chart keeps the approver ClusterRole.
	approverTemplate = "templates/approver-rbac.yaml"

	// defaultFullname is what the chart's fullname is for the default release (gate-operator),
	// and the prefix of every name in config/: the chart puts its fullname in its place.
	defaultFullname = "gate-operator"
)

// approverComment is what the chart adds to config/rbac/approver_role.yaml.
const approverComment = `{{- /*
The approver ClusterRole of config/rbac/approver_role.yaml (its comment says who needs it). The
chart binds it to nobody; with approver.aggregateToAdmin it aggregates into the built-in admin
ClusterRole, so every namespace admin may approve there.
*/}}
`

// approverLabels are the labels the chart adds to the approver ClusterRole.
const approverLabels = `    {{- if .Values.approver.aggregateToAdmin }}
    rbac.authorization.k8s.io/aggregate-to-admin: "true"
    {{- end }}
`

func renderManagerRole(configDir, source string) ([]byte, error) {
	return renderClusterRole(filepath.Join(configDir, source), managerRoleName, "", "")
}

func renderApproverRole(configDir, source string) ([]byte, error) {
	return renderClusterRole(filepath.Join(configDir, source), approverRoleName, approverComment, approverLabels)
}

// renderClusterRole writes the ClusterRole name, the only object of path, as a chart template:
// named for the release, with the chart's labels and the labels of config/ the chart's do not
// cover, then chartLabels, and exactly its rules.
func renderClusterRole(path, name, comment, chartLabels string) ([]byte, error) {
	docs, err := readDocs(path)
	if err != nil {
		return nil, err
	}
	var rules []any
	var labels map[string]string
	found := false
	for _, doc := range docs {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string            `json:"name"`
				Namespace string            `json:"namespace"`
				Labels    map[string]string `json:"labels"`
			} `json:"metadata"`
			Rules []any `json:"rules"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if obj.Kind != "ClusterRole" || obj.Metadata.Name != name {
			// controller-gen writes namespaced Roles into the same file when a marker names a
			// namespace; the chart has no template for those yet, so refuse rather than drop rules.
			return nil, fmt.Errorf("%s: unexpected %s %q: only the ClusterRole %q is synced into the chart; extend hack/sync-chart", path, obj.Kind, obj.Metadata.Name, name)
		}
		if found {
			return nil, fmt.Errorf("%s: ClusterRole %q appears twice", path, name)
		}
		found = true
		rules, labels = obj.Rules, obj.Metadata.Labels
	}
	if !found {
		return nil, fmt.Errorf("%s: no ClusterRole %q", path, name)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("%s: ClusterRole %q has no rules", path, name)
	}
	templateName, err := releaseName(path, name)
	if err != nil {
		return nil, err
	}
	body, err := yaml.Marshal(map[string]any{"rules": rules})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(generatedHeader(path))
	b.WriteString(comment)
	b.WriteString(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
`)
	fmt.Fprintf(&b, "  name: %s\n", templateName)
	labelText, err := labelsTemplate(path, labels)
	if err != nil {
		return nil, err
	}
	b.WriteString(labelText)
	b.WriteString(chartLabels)
	b.Write(body)
	return b.Bytes(), nil
}

// releaseName is the template of a name of config/ in the chart: the default release's
// fullname, gate-operator, becomes the release's.
func releaseName(path, name string) (string, error) {
	suffix, ok := strings.CutPrefix(name, defaultFullname)
	if !ok || (suffix != "" && !strings.HasPrefix(suffix, "-")) {
		return "", fmt.Errorf("%s: the name %q does not start with %q, so the chart cannot name it for its release; extend hack/sync-chart", path, name, defaultFullname)
	}
	return `{{ include "gate-operator.fullname" . }}` + suffix, nil
}

// chartLabelKeys are the labels the chart's gate-operator.labels sets on every object, for the
// release; config/ spells some of them for the default release.
var chartLabelKeys = map[string]bool{
	"helm.sh/chart":                true,
	"app.kubernetes.io/name":       true,
	"app.kubernetes.io/instance":   true,
	"app.kubernetes.io/version":    true,
	"app.kubernetes.io/managed-by": true,
	"app.kubernetes.io/part-of":    true,
}

// labelsTemplate is the labels block of metadata (indented two spaces): the chart's labels and
// those of config/ the chart's do not set, such as app.kubernetes.io/component.
func labelsTemplate(path string, labels map[string]string) (string, error) {
	var b strings.Builder
	b.WriteString("  labels:\n    {{- include \"gate-operator.labels\" . | nindent 4 }}\n")
	extra := map[string]string{}
	for k, v := range labels {
		if !chartLabelKeys[k] {
			extra[k] = v
		}
	}
	if len(extra) > 0 {
		text, err := yaml.Marshal(extra)
		if err != nil {
			return "", err
		}
		if err := noTemplateDelimiters(path, text); err != nil {
			return "", err
		}
		for _, line := range strings.SplitAfter(strings.TrimSuffix(string(text), "\n"), "\n") {
			b.WriteString("    " + line)
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}
