// Package monitoring tests the chart's Grafana dashboard and alert rules: promtool, built at a
// pinned version, checks the rules and runs their unit tests (testdata/alerts.test.yaml) and
// checks every dashboard query; and every metric and label they read is served by the
// components, run here and scraped (live_test.go).
package monitoring

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/promquery"
	"github.com/intutic/gate-operator/internal/testutil"
)

// promtool's pin; the Makefile's tools target installs the same.
const (
	promtoolVersion = "v0.316.0"
	promtoolPackage = "github.com/prometheus/prometheus/cmd/promtool"
)

const (
	rulesFile     = "charts/gate-operator/rules/gate-operator.rules.yaml"
	dashboardFile = "charts/gate-operator/dashboards/gate-operator.json"
	alertTests    = "testdata/alerts.test.yaml"
)

var (
	promtoolOnce sync.Once
	promtoolErr  error
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := apiservertest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// promtool runs bin/promtool, installing it first if it is missing or another version.
func promtool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := repoRoot(t)
	bin := filepath.Join(root, "bin", "promtool")
	promtoolOnce.Do(func() {
		promtoolErr = testutil.InstallTool(root, bin, promtoolPackage, promtoolVersion, "about 6 minutes on 2 cores")
	})
	if promtoolErr != nil {
		t.Fatal(promtoolErr)
	}
	// go test caches a pass until a file the test itself opened changes: read what promtool
	// reads on its behalf.
	for _, f := range []string{filepath.Join(root, rulesFile), filepath.Join(root, dashboardFile), alertTests, bin + ".version"} {
		_, _ = os.ReadFile(f)
	}
	return testutil.Run(t, "", bin, args...)
}

// TestAlertRules: promtool accepts the rules file, lints it, and its unit tests pass.
func TestAlertRules(t *testing.T) {
	if out, err := promtool(t, "check", "rules", "--lint=all", "--lint-fatal", filepath.Join(repoRoot(t), rulesFile)); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := promtool(t, "test", "rules", alertTests); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestPromtoolPin: the Makefile's tools target installs the promtool these tests run, and
// promql-refs (hack/promql-refs), which reads the queries for promquery, has the same parser.
func TestPromtoolPin(t *testing.T) {
	if pin := pinned(t, "Makefile", "PROMTOOL_VERSION"); pin != promtoolVersion {
		t.Errorf("the Makefile pins promtool %s, the tests %s", pin, promtoolVersion)
	}
	if pin := pinned(t, "hack/promql-refs/go.mod", "github.com/prometheus/prometheus"); pin != promtoolVersion {
		t.Errorf("hack/promql-refs requires github.com/prometheus/prometheus %s, promtool is %s", pin, promtoolVersion)
	}
}

// pinned is the last word of the first line of file (under the repository root) whose first
// word is key: `PROMTOOL_VERSION ?= v1`, or a go.mod's `example.com/module v1`.
func pinned(t *testing.T, file, key string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), file))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			return f[len(f)-1]
		}
	}
	t.Fatalf("%s has no line for %s", file, key)
	return ""
}

// alertTestFile is the part of a promtool unit-test file this test reads.
type alertTestFile struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name      string `json:"name"`
		AlertTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestAlertsHaveUnitTests: every alert of the rules file is tested both firing and not firing.
func TestAlertsHaveUnitTests(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var rules promquery.Rules
	if err := yaml.UnmarshalStrict(data, &rules); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(alertTests)
	if err != nil {
		t.Fatal(err)
	}
	var tests alertTestFile
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatal(err)
	}
	// Paths in the file are relative to it, in testdata/.
	if len(tests.RuleFiles) != 1 || filepath.Clean(tests.RuleFiles[0]) != filepath.Join("..", "..", "..", rulesFile) {
		t.Fatalf("the unit tests load %v, want the chart's rules file", tests.RuleFiles)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: tested firing %v, tested not firing %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	if alerts == 0 {
		t.Fatal("the rules file has no alerts")
	}
}

// TestDashboardQueriesArePromQL: every query of the dashboard, with Grafana's interval
// variables replaced, is PromQL to promtool (written as recording rules for promtool check
// rules), as a PrometheusRule's or Grafana's Prometheus would read it.
func TestDashboardQueriesArePromQL(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	queries, err := promquery.DashboardQueries(data)
	if err != nil {
		t.Fatal(err)
	}
	var rules promquery.Rules
	rules.Groups = make([]struct {
		Name  string           `json:"name"`
		Rules []promquery.Rule `json:"rules"`
	}, 1)
	rules.Groups[0].Name = "dashboard"
	for i, q := range queries {
		rules.Groups[0].Rules = append(rules.Groups[0].Rules, promquery.Rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: q.Expr})
	}
	out, err := yaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard.rules.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := promtool(t, "check", "rules", file); err != nil {
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s\n(queries: %v)", err, out, queries)
	}
}
