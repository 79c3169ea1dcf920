// Package promquery reads the PromQL of the chart's Grafana dashboard and alert rules, and
// reports every metric and label they read that no scraped component serves: a dashboard panel
// or an alert over a metric that was renamed, or a label that was dropped, would otherwise stay
// empty and silent.
//
// It reads a subset of PromQL (parse.go says which) with a parser of its own, so the product
// does not depend on the Prometheus server's module; what it cannot read is an error, and
// promtool checks the same expressions with Prometheus's own parser (test/monitoring).
package promquery

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// ScrapeLabels are the labels a Prometheus scrape adds to every series it takes from a
// Kubernetes target (a ServiceMonitor or a PodMonitor): a query may read them from any metric.
// A component's own label of one of these names is a problem: the scrape renames it
// exported_<name>.
var ScrapeLabels = []string{"job", "instance", "namespace", "pod", "container", "service", "endpoint"}

// Served is what the scraped components serve: each sample name (a histogram's _bucket, _sum
// and _count apart) with the label names its series carry.
type Served map[string]map[string]bool

// ServedBy collects the metric families scraped from the components.
func ServedBy(scrapes ...map[string]*dto.MetricFamily) Served {
	s := Served{}
	add := func(name string, labels []*dto.LabelPair, extra string) {
		if s[name] == nil {
			s[name] = map[string]bool{}
		}
		for _, l := range labels {
			s[name][l.GetName()] = true
		}
		if extra != "" {
			s[name][extra] = true
		}
	}
	for _, families := range scrapes {
		for name, f := range families {
			for _, m := range f.GetMetric() {
				switch f.GetType() {
				case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
					add(name+"_bucket", m.GetLabel(), "le")
					add(name+"_sum", m.GetLabel(), "")
					add(name+"_count", m.GetLabel(), "")
				case dto.MetricType_SUMMARY:
					add(name, m.GetLabel(), "quantile")
					add(name+"_sum", m.GetLabel(), "")
					add(name+"_count", m.GetLabel(), "")
				default:
					add(name, m.GetLabel(), "")
				}
			}
		}
	}
	return s
}

// Query is one PromQL expression of the dashboard or the rules.
type Query struct {
	// Source says where it is: `alert GatePolicyNotReady`, `panel "Decisions by verdict"`.
	Source string
	Expr   string
	// Uses are the labels read from its result: a legend's {{x}}, an annotation's $labels.x.
	Uses []string
}

// Problem is a metric or label a query reads that no component serves, or a query this
// package cannot read.
type Problem struct {
	Source  string
	Message string
}

func (p Problem) String() string { return p.Source + ": " + p.Message }

// Check reports, for each query, every metric that no component serves, every label that no
// series of the metric it is read from carries (scrape labels aside), and every label of a
// metric it reads that a scrape label would overwrite. Label values are not checked: a
// counter's series for a value appears only once it has counted one.
func Check(served Served, queries []Query) []Problem {
	var out []Problem
	for _, q := range queries {
		n, err := parse(q.Expr)
		if err != nil {
			out = append(out, Problem{q.Source, fmt.Sprintf("%v in %q", err, q.Expr)})
			continue
		}
		c := &checker{served: served, source: q.Source}
		result := c.eval(n)
		if result.scalar {
			result.labels = labelSet{}
		}
		for _, l := range q.Uses {
			if result.labels != nil && !result.labels[l] {
				c.report("the result has no label %s (it has %s)", l, list(result.labels))
			}
		}
		out = append(out, c.problems...)
	}
	return out
}

// labelSet is a set of label names; nil stands for any label (the labels of a metric no
// component serves, already reported).
type labelSet map[string]bool

func list(s labelSet) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(s)), ", ")
}

type checker struct {
	served   Served
	source   string
	problems []Problem
}

func (c *checker) report(format string, args ...any) {
	p := Problem{c.source, fmt.Sprintf(format, args...)}
	if !slices.Contains(c.problems, p) {
		c.problems = append(c.problems, p)
	}
}

// require reports each label of ls that set lacks; what says where they are read.
func (c *checker) require(set labelSet, ls []string, what string, n node) {
	if set == nil {
		return
	}
	for _, l := range ls {
		if !set[l] {
			c.report("%s: no series of %s carries the label %s", what, strings.Join(metrics(n), ", "), l)
		}
	}
}

// value is what an expression yields: a scalar (or a string), or a vector whose series may
// carry labels (nil: any label, for a metric no component serves, already reported).
type value struct {
	scalar bool
	labels labelSet
}

// vectorArg is the vector among args (the others are scalars and strings); a vector without
// labels when there is none.
func (c *checker) vectorArg(args []node) value {
	v := value{labels: labelSet{}}
	for _, a := range args {
		if r := c.eval(a); !r.scalar {
			v = r
		}
	}
	return v
}

// eval returns what n yields, and reports what n reads that is not served.
func (c *checker) eval(n node) value {
	switch n := n.(type) {
	case literal:
		return value{scalar: true}
	case selector:
		return value{labels: c.selector(n)}
	case call:
		switch n.fn {
		case "time", "scalar":
			c.vectorArg(n.args)
			return value{scalar: true}
		}
		arg := c.vectorArg(n.args)
		switch functions[n.fn] {
		case withoutLe:
			if arg.labels != nil && !arg.labels["le"] {
				c.report("histogram_quantile over %s, which has no label le", strings.Join(metrics(n), ", "))
			}
			return value{labels: without(arg.labels, "le")}
		case noLabels:
			return value{labels: labelSet{}}
		}
		return arg
	case aggregation:
		in := c.vectorArg(n.args).labels
		what := n.op + " by (" + strings.Join(n.grouping, ", ") + ")"
		if n.without {
			what = n.op + " without (" + strings.Join(n.grouping, ", ") + ")"
		}
		c.require(in, n.grouping, what, n)
		switch {
		case aggregations[n.op]:
			return value{labels: in}
		case n.without:
			return value{labels: without(in, n.grouping...)}
		default:
			out := labelSet{}
			for _, l := range n.grouping {
				out[l] = true
			}
			return value{labels: out}
		}
	case binary:
		return c.binary(n)
	}
	panic(fmt.Sprintf("promquery: unknown node %T", n))
}

func (c *checker) selector(s selector) labelSet {
	served, ok := c.served[s.metric]
	if !ok {
		c.report("no component serves %s", s.metric)
		return nil
	}
	set := labelSet{}
	for l := range served {
		if slices.Contains(ScrapeLabels, l) {
			c.report("%s carries the label %s, which the scrape overwrites (the query would see exported_%s)", s.metric, l, l)
		}
		set[l] = true
	}
	for _, l := range ScrapeLabels {
		set[l] = true
	}
	for _, l := range s.labels {
		if !set[l] {
			c.report("no series of %s carries the label %s", s.metric, l)
		}
	}
	return set
}

// binary follows PromQL's vector matching: a comparison or arithmetic keeps the left side's
// labels (only the on labels, or all but the ignoring ones, when matched one-to-one), with
// group_left or group_right the many side's plus the included ones; and and unless keep the
// left side's, or both sides'.
func (c *checker) binary(b binary) value {
	l, r := c.eval(b.lhs), c.eval(b.rhs)
	if l.scalar || r.scalar {
		if b.hasMatchModifier || b.include != nil {
			c.report("vector matching (%s) with a scalar side", b.op)
		}
		if !l.scalar {
			return l
		}
		return r
	}
	lhs, rhs := l.labels, r.labels
	c.matching(b, lhs, rhs)
	switch {
	case b.op == "or":
		if lhs == nil || rhs == nil {
			return value{}
		}
		out := maps.Clone(lhs)
		maps.Copy(out, rhs)
		return value{labels: out}
	case b.op == "and" || b.op == "unless":
		return value{labels: lhs}
	case b.groupLeft:
		c.require(rhs, b.include, b.op+" group_left ("+strings.Join(b.include, ", ")+")", b.rhs)
		return value{labels: plus(lhs, b.include)}
	case b.groupRight:
		c.require(lhs, b.include, b.op+" group_right ("+strings.Join(b.include, ", ")+")", b.lhs)
		return value{labels: plus(rhs, b.include)}
	case b.on:
		out := labelSet{}
		for _, l := range b.matching {
			out[l] = true
		}
		return value{labels: out}
	default:
		return value{labels: without(lhs, b.matching...)}
	}
}

// matching reports the on and ignoring labels of b that its sides do not carry: an on label
// must be on both sides, an ignoring label on one at least.
func (c *checker) matching(b binary, lhs, rhs labelSet) {
	if b.on {
		what := b.op + " on (" + strings.Join(b.matching, ", ") + ")"
		c.require(lhs, b.matching, what, b.lhs)
		c.require(rhs, b.matching, what, b.rhs)
		return
	}
	for _, l := range b.matching {
		if lhs != nil && rhs != nil && !lhs[l] && !rhs[l] {
			c.report("%s ignoring (%s): neither side carries the label %s", b.op, strings.Join(b.matching, ", "), l)
		}
	}
}

func without(s labelSet, drop ...string) labelSet {
	if s == nil {
		return nil
	}
	out := maps.Clone(s)
	for _, l := range drop {
		delete(out, l)
	}
	return out
}

func plus(s labelSet, add []string) labelSet {
	if s == nil {
		return nil
	}
	out := maps.Clone(s)
	for _, l := range add {
		out[l] = true
	}
	return out
}

// metrics are the metric names n selects, sorted.
func metrics(n node) []string {
	set := map[string]bool{}
	var walk func(node)
	walk = func(n node) {
		switch n := n.(type) {
		case selector:
			set[n.metric] = true
		case call:
			for _, a := range n.args {
				walk(a)
			}
		case aggregation:
			for _, a := range n.args {
				walk(a)
			}
		case binary:
			walk(n.lhs)
			walk(n.rhs)
		}
	}
	walk(n)
	out := slices.Collect(maps.Keys(set))
	sort.Strings(out)
	return out
}

// Metrics are the metric names the queries select, sorted; a query that does not parse adds
// none.
func Metrics(queries []Query) []string {
	set := map[string]bool{}
	for _, q := range queries {
		if n, err := parse(q.Expr); err == nil {
			for _, m := range metrics(n) {
				set[m] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}
