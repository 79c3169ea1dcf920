package install_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestHelmTemplateMonitoring: the dashboard's ConfigMap and the PrometheusRule are off by
// default; on, the ConfigMap carries dashboards/gate-operator.json byte for byte under the
// sidecar's label, and the PrometheusRule's groups are rules/gate-operator.rules.yaml, the
// file promtool tests (neither is templated, so their double braces reach Grafana and
// Prometheus untouched).
func TestHelmTemplateMonitoring(t *testing.T) {
	for _, o := range helmTemplate(t) {
		if o.GetKind() == "PrometheusRule" || o.GetKind() == "ConfigMap" && strings.HasSuffix(o.GetName(), "-dashboard") {
			t.Errorf("%s %s rendered with the default values, which leave monitoring off", o.GetKind(), o.GetName())
		}
	}
	dashboard, err := os.ReadFile(filepath.Join(root, "charts", "gate-operator", "dashboards", "gate-operator.json"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(filepath.Join(root, "charts", "gate-operator", "rules", "gate-operator.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var wantRules map[string]any
	if err := yaml.Unmarshal(rules, &wantRules); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, values           string
		cmNamespace            string
		labelKey, labelValue   string
		cmAnnotations, prLabel map[string]string
	}{
		{name: "defaults of the switches", values: "grafanaDashboard: {enabled: true}\nprometheusRule: {enabled: true}\n",
			cmNamespace: namespace, labelKey: "grafana_dashboard", labelValue: "1"},
		{name: "custom values", values: customValues, cmNamespace: "grafana", labelKey: "grafana.example.com/dashboard", labelValue: "gate",
			cmAnnotations: map[string]string{"grafana_folder": "Platform"}, prLabel: map[string]string{"release": "prometheus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := helmTemplate(t, "-f", writeValues(t, tc.values))
			cm := find(t, objs, "ConfigMap", release+"-dashboard")
			if cm.GetNamespace() != tc.cmNamespace {
				t.Errorf("the dashboard's ConfigMap is in %q, want %q", cm.GetNamespace(), tc.cmNamespace)
			}
			if got := cm.GetLabels()[tc.labelKey]; got != tc.labelValue {
				t.Errorf("the dashboard's ConfigMap labels %v, want %s: %q", cm.GetLabels(), tc.labelKey, tc.labelValue)
			}
			for k, v := range tc.cmAnnotations {
				if cm.GetAnnotations()[k] != v {
					t.Errorf("the dashboard's ConfigMap annotations %v, want %s: %s", cm.GetAnnotations(), k, v)
				}
			}
			data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
			if len(data) != 1 || data["gate-operator.json"] != strings.TrimSuffix(string(dashboard), "\n") {
				t.Errorf("the ConfigMap's data is not dashboards/gate-operator.json (keys %v)", keys(data))
			}

			pr := find(t, objs, "PrometheusRule", release)
			if pr.GetAPIVersion() != "monitoring.coreos.com/v1" || pr.GetNamespace() != namespace {
				t.Errorf("PrometheusRule is %s in %q, want monitoring.coreos.com/v1 in %q", pr.GetAPIVersion(), pr.GetNamespace(), namespace)
			}
			for k, v := range tc.prLabel {
				if pr.GetLabels()[k] != v {
					t.Errorf("PrometheusRule labels %v, want %s: %s", pr.GetLabels(), k, v)
				}
			}
			spec, _, _ := unstructured.NestedMap(pr.Object, "spec")
			if !equality.Semantic.DeepEqual(spec, wantRules) {
				t.Errorf("the PrometheusRule's spec is not rules/gate-operator.rules.yaml:\n%s", toYAML(t, spec))
			}
		})
	}
}
