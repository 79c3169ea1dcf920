package promquery

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// Rules are a Prometheus rules file (the `groups:` format promtool and a PrometheusRule's spec
// share), as far as this package reads it.
type Rules struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []Rule `json:"rules"`
	} `json:"groups"`
}

// Rule is an alerting or a recording rule.
type Rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// labelRefs finds $labels.x in an alert's templates.
var labelRefs = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)

// RuleQueries are the expressions of a rules file, each with the labels its alert's labels and
// annotations read ($labels.x).
func RuleQueries(data []byte) ([]Query, error) {
	var r Rules
	if err := yaml.UnmarshalStrict(data, &r); err != nil {
		return nil, err
	}
	var out []Query
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			q := Query{Source: "record " + rule.Record, Expr: rule.Expr}
			if rule.Alert != "" {
				q.Source = "alert " + rule.Alert
			}
			for _, m := range []map[string]string{rule.Labels, rule.Annotations} {
				for _, v := range m {
					for _, ref := range labelRefs.FindAllStringSubmatch(v, -1) {
						q.Uses = appendNew(q.Uses, ref[1])
					}
				}
			}
			out = append(out, q)
		}
	}
	return out, nil
}

// dashboard is a Grafana dashboard, as far as this package reads it: panels (also those
// nested in a row), their targets, and the template variables.
type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

// GrafanaIntervals are the interval variables Grafana replaces in a query, and the value the
// queries are read (and checked by promtool) with.
var GrafanaIntervals = strings.NewReplacer("${__rate_interval}", "5m", "$__rate_interval", "5m",
	"${__interval}", "1m", "$__interval", "1m", "${__range}", "1h", "$__range", "1h")

var (
	legendRefs  = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	labelValues = regexp.MustCompile(`^label_values\(\s*(.+?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)
)

// DashboardQueries are the expressions of a Grafana dashboard's panels, with Grafana's interval
// variables replaced (GrafanaIntervals), each with the labels its legend reads ({{x}}); and its
// query variables, label_values(<expr>, <label>), each as <expr> using <label>.
func DashboardQueries(data []byte) ([]Query, error) {
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	var out []Query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for i, t := range p.Targets {
				q := Query{Source: fmt.Sprintf("panel %q, target %d", p.Title, i+1), Expr: GrafanaIntervals.Replace(t.Expr)}
				for _, ref := range legendRefs.FindAllStringSubmatch(t.LegendFormat, -1) {
					q.Uses = appendNew(q.Uses, ref[1])
				}
				out = append(out, q)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var query string
		if json.Unmarshal(v.Query, &query) != nil {
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				return nil, fmt.Errorf("variable %s: the query is neither a string nor {query: ...}", v.Name)
			}
			query = obj.Query
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(query))
		if m == nil {
			return nil, fmt.Errorf("variable %s: %q is not label_values(<expr>, <label>)", v.Name, query)
		}
		out = append(out, Query{Source: "variable " + v.Name, Expr: m[1], Uses: []string{m[2]}})
	}
	return out, nil
}

// The chart's dashboard and rules files, under its directory.
const (
	ChartDashboard = "dashboards/gate-operator.json"
	ChartRules     = "rules/gate-operator.rules.yaml"
)

// ChartQueries are the queries of the dashboard and the alert rules of the chart at dir
// (charts/gate-operator), each Source prefixed with its file.
func ChartQueries(dir string) ([]Query, error) {
	var out []Query
	for _, f := range []struct {
		file string
		read func([]byte) ([]Query, error)
	}{{ChartDashboard, DashboardQueries}, {ChartRules, RuleQueries}} {
		data, err := os.ReadFile(filepath.Join(dir, f.file))
		if err != nil {
			return nil, err
		}
		qs, err := f.read(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.file, err)
		}
		for _, q := range qs {
			q.Source = f.file + ": " + q.Source
			out = append(out, q)
		}
	}
	return out, nil
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
