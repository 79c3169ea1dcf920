package main

import (
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// FuzzTree: every expression Prometheus's parser accepts is read into a tree, without a panic.
func FuzzTree(f *testing.F) {
	for _, seed := range []string{
		`sum by (verdict) (rate(gate_agent_decisions_total{code!=""}[5m])) > 0`,
		`histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m:1m] offset -5m @ start())))`,
		`a / ignoring (b) group_left (c) d`, `a and on (b) c`, `-(1 + 2) ^ 3 ^ 4`, `"str"`,
		`topk(5, x)`, `count_values("v", x)`, `label_replace(x, "a", "$1", "b", "(.*)")`,
		`{__name__=~"x|y"}`, `x offset (1h + 5m)`, `{`, `sum(`, `x[`,
	} {
		f.Add(seed)
	}
	p := parser.NewParser(parser.Options{})
	f.Fuzz(func(t *testing.T, expr string) {
		if e, err := p.ParseExpr(expr); err == nil {
			if _, err := tree(e); err != nil {
				t.Errorf("%q: %v", expr, err)
			}
		}
	})
}
