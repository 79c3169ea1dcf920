package promquery_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/intutic/gate-operator/internal/promquery"
	"github.com/intutic/gate-operator/internal/promquery/promquerytest"
)

// scrape is what two components might serve, in the text format.
const scrape = `# TYPE gate_agent_decisions_total counter
gate_agent_decisions_total{code="",layer="",mode="enforce",rule="no-stop",verdict="Block"} 1
# TYPE gate_agent_decision_duration_seconds histogram
gate_agent_decision_duration_seconds_bucket{le="0.001"} 1
gate_agent_decision_duration_seconds_bucket{le="+Inf"} 1
gate_agent_decision_duration_seconds_sum 0.0001
gate_agent_decision_duration_seconds_count 1
# TYPE gate_operator_policy_ready gauge
gate_operator_policy_ready{kind="HarnessAgentPolicy",policy="p",policy_namespace="agents"} 1
# TYPE gate_operator_confirmer_replicas gauge
gate_operator_confirmer_replicas{confirmer="c",confirmer_namespace="agents"} 2
# TYPE gate_operator_confirmer_ready_replicas gauge
gate_operator_confirmer_ready_replicas{confirmer="c",confirmer_namespace="agents"} 1
# TYPE confirmer_members gauge
confirmer_members 2
# TYPE clashing_total counter
clashing_total{namespace="agents"} 1
`

func served(t *testing.T) promquery.Served {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(scrape))
	if err != nil {
		t.Fatal(err)
	}
	return promquery.ServedBy(families)
}

func TestCheck(t *testing.T) {
	s := served(t)
	for _, tc := range []struct {
		expr string
		uses []string
		want []string // substrings of the problems, in order; none for a query that reads only what is served
	}{
		// Selectors, matchers and scrape labels.
		{expr: `gate_agent_decisions_total`},
		{expr: `gate_agent_decisions_total{verdict="Block", code!="", namespace=~"agents|tools"}`, uses: []string{"rule", "pod"}},
		{expr: `gate_agent_decisions_totl`, want: []string{"no component serves gate_agent_decisions_totl"}},
		{expr: `gate_agent_decisions_total{surface="hook"}`, want: []string{"no series of gate_agent_decisions_total carries the label surface"}},
		{expr: `clashing_total`, want: []string{"clashing_total carries the label namespace, which the scrape overwrites"}},
		// Aggregations keep their grouping, and read it from their input.
		{expr: `sum by (verdict, namespace) (rate(gate_agent_decisions_total[5m]))`, uses: []string{"verdict", "namespace"}},
		{expr: `sum(rate(gate_agent_decisions_total[5m])) by (verdict)`, uses: []string{"verdict"}},
		{expr: `sum by (verdict) (rate(gate_agent_decisions_total[5m]))`, uses: []string{"rule"}, want: []string{"the result has no label rule (it has verdict)"}},
		{expr: `sum by (surface) (gate_agent_decisions_total)`, want: []string{"sum by (surface): no series of gate_agent_decisions_total carries the label surface"}},
		{expr: `sum without (code, layer) (gate_agent_decisions_total)`, uses: []string{"rule"}},
		{expr: `sum without (code) (gate_agent_decisions_total)`, uses: []string{"code"}, want: []string{"the result has no label code"}},
		{expr: `topk(5, sum by (rule) (increase(gate_agent_decisions_total{verdict!="Allow"}[1h])))`, uses: []string{"rule"}},
		{expr: `count(gate_operator_policy_ready == 0)`, uses: []string{"policy"}, want: []string{"the result has no label policy (it has none)"}},
		// Histograms: _bucket carries le; histogram_quantile drops it.
		{expr: `histogram_quantile(0.99, sum by (le) (rate(gate_agent_decision_duration_seconds_bucket[$__rate_interval])))`},
		{expr: `histogram_quantile(0.99, sum by (le, pod) (rate(gate_agent_decision_duration_seconds_bucket[5m])))`, uses: []string{"le"}, want: []string{"the result has no label le"}},
		{expr: `histogram_quantile(0.99, sum(rate(gate_agent_decision_duration_seconds_bucket[5m])))`, want: []string{"histogram_quantile over gate_agent_decision_duration_seconds_bucket, which has no label le"}},
		{expr: `rate(gate_agent_decision_duration_seconds_sum[5m]) / rate(gate_agent_decision_duration_seconds_count[5m])`},
		// Vector matching.
		{expr: `max by (confirmer_namespace, confirmer) (gate_operator_confirmer_ready_replicas) < max by (confirmer_namespace, confirmer) (gate_operator_confirmer_replicas)`, uses: []string{"confirmer"}},
		{expr: `gate_operator_confirmer_ready_replicas < on (confirmer_namespace, confirmer) gate_operator_confirmer_replicas`, uses: []string{"confirmer"}},
		{expr: `gate_operator_confirmer_ready_replicas < on (confirmer) gate_operator_confirmer_replicas`, uses: []string{"confirmer_namespace"}, want: []string{"the result has no label confirmer_namespace"}},
		{expr: `gate_operator_confirmer_ready_replicas < on (policy) gate_operator_confirmer_replicas`, want: []string{"< on (policy): no series of gate_operator_confirmer_ready_replicas carries the label policy", "< on (policy): no series of gate_operator_confirmer_replicas carries the label policy"}},
		{expr: `gate_operator_confirmer_ready_replicas / ignoring (pod) group_left (kind) gate_operator_policy_ready`, uses: []string{"confirmer", "kind"}},
		{expr: `confirmer_members > bool 1 or gate_agent_decisions_total`, uses: []string{"rule"}},
		// Scalars, time, offsets and subqueries.
		{expr: `min(gate_operator_policy_ready) - time() < 7 * 24 * 3600`},
		{expr: `max_over_time(confirmer_members[1h:5m] offset 1h) > -1e-3`},
		{expr: `scalar(confirmer_members) * 2`, uses: []string{"pod"}, want: []string{"the result has no label pod"}},
		// What the check does not read is reported, never skipped; so is what Prometheus's
		// parser refuses.
		{expr: `label_replace(confirmer_members, "x", "$1", "pod", "(.*)")`, want: []string{"function label_replace is not one this check reads"}},
		{expr: `count_values("v", confirmer_members)`, want: []string{"aggregation count_values is not one this check reads"}},
		{expr: `{__name__="confirmer_members"}`, want: []string{"a selector without a metric name"}},
		{expr: `confirmer_members{__name__=~"x|y"}`, want: []string{"metric name must not be set twice"}},
		{expr: `sum by (pod) (label_join(gate_agent_decisions_totl, "x", ",", "rule"))`, want: []string{"no component serves gate_agent_decisions_totl", "function label_join is not one this check reads"}},
		{expr: `sum(confirmer_members`, want: []string{`unclosed left parenthesis in "sum(confirmer_members"`}},
		{expr: `confirmer_members[$namespace]`, want: []string{`parse error`}},
		{expr: `confirmer_members + on (pod) 1`, want: []string{"vector matching only allowed between instant vectors"}},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			expr := promquery.GrafanaIntervals.Replace(tc.expr)
			parsed := promquerytest.Parse(t, []promquery.Query{{Source: "q", Expr: expr, Uses: tc.uses}})
			var got []string
			for _, p := range promquery.Check(s, parsed) {
				got = append(got, p.Message)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d: %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("problem %q does not say %q", got[i], tc.want[i])
				}
			}
		})
	}
}

// TestMetrics: the metrics of the queries the parser reads, each once; a refused query adds none.
func TestMetrics(t *testing.T) {
	parsed := promquerytest.Parse(t, []promquery.Query{
		{Expr: `rate(a_total[5m]) / on (x) group_left b`},
		{Expr: `histogram_quantile(0.9, sum by (le) (rate(c_bucket[5m]))) > bool 1 or a_total`},
		{Expr: `sum(d`},
	})
	if got, want := promquery.Metrics(parsed), []string{"a_total", "b", "c_bucket"}; !slices.Equal(got, want) {
		t.Errorf("metrics %q, want %q", got, want)
	}
}

func TestRuleQueries(t *testing.T) {
	qs, err := promquery.RuleQueries([]byte(`
groups:
- name: g
  rules:
  - alert: A
    expr: gate_operator_policy_ready == 0
    for: 10m
    labels: {severity: warning}
    annotations:
      summary: '{{ $labels.kind }} {{$labels.policy_namespace}}/{{ $labels.policy }} is not Ready'
  - record: r:sum
    expr: sum(confirmer_members)
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 || qs[0].Source != "alert A" || !slices.Equal(qs[0].Uses, []string{"kind", "policy_namespace", "policy"}) || qs[1].Source != "record r:sum" || qs[1].Uses != nil {
		t.Fatalf("queries %+v", qs)
	}
	if _, err := promquery.RuleQueries([]byte("groups:\n- name: g\n  rulez: []\n")); err == nil {
		t.Error("an unknown field was read")
	}
}

func TestDashboardQueries(t *testing.T) {
	qs, err := promquery.DashboardQueries([]byte(`{
  "panels": [
    {"title": "Row", "type": "row", "panels": [
      {"title": "Nested", "targets": [{"expr": "sum by (verdict) (rate(gate_agent_decisions_total[$__rate_interval]))", "legendFormat": "{{verdict}} {{ namespace }}"}]}
    ]},
    {"title": "Top", "targets": [{"expr": "confirmer_members"}]}
  ],
  "templating": {"list": [
    {"name": "datasource", "type": "datasource", "query": "prometheus"},
    {"name": "namespace", "type": "query", "query": {"query": "label_values(gate_agent_decisions_total, namespace)"}}
  ]}
}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []promquery.Query{
		{Source: `panel "Nested", target 1`, Expr: "sum by (verdict) (rate(gate_agent_decisions_total[5m]))", Uses: []string{"verdict", "namespace"}},
		{Source: `panel "Top", target 1`, Expr: "confirmer_members"},
		{Source: "variable namespace", Expr: "gate_agent_decisions_total", Uses: []string{"namespace"}},
	}
	if !slices.EqualFunc(qs, want, func(a, b promquery.Query) bool {
		return a.Source == b.Source && a.Expr == b.Expr && slices.Equal(a.Uses, b.Uses)
	}) {
		t.Fatalf("queries %+v, want %+v", qs, want)
	}
	if _, err := promquery.DashboardQueries([]byte(`{"templating": {"list": [{"name": "x", "type": "query", "query": "query_result(up)"}]}}`)); err == nil {
		t.Error("a variable other than label_values was read")
	}
}
