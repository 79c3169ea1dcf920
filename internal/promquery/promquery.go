// Package promquery reads the PromQL of the chart's Grafana dashboard and alert rules, and
// reports every metric and label they read that no scraped component serves: a dashboard panel
// or an alert over a metric that was renamed, or a label that was dropped, would otherwise stay
// empty and silent.
//
// Parse reads the expressions with Prometheus's own parser, which runs in the promql-refs tool
// (hack/promql-refs): a module of its own, so that the product does not depend on the
// Prometheus server's module. Check follows how each expression's labels flow from its
// selectors to its result through the functions and aggregations it knows (functions,
// aggregations); it reports any other, and a selector without a metric name, so that no query
// passes the check unread.
package promquery

import (
	"fmt"
	"maps"
	"slices"
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
// metric it reads that a scrape label would overwrite; and each expression Prometheus's parser
// refuses, or the check does not read. Label values are not checked: a counter's series for a
// value appears only once it has counted one.
func Check(served Served, queries []Parsed) []Problem {
	var out []Problem
	for _, q := range queries {
		if q.tree == nil {
			out = append(out, Problem{q.Source, q.refused})
			continue
		}
		c := &checker{served: served, source: q.Source}
		result := c.eval(q.tree)
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

// aggregations are the PromQL aggregation operators the check reads; the ones whose result
// keeps the input's labels (they select series) are true.
var aggregations = map[string]bool{
	"sum": false, "avg": false, "min": false, "max": false, "count": false, "group": false,
	"stddev": false, "stdvar": false, "quantile": false,
	"topk": true, "bottomk": true, "limitk": true,
}

// functions are the PromQL functions the check reads, by what their result carries: the
// labels of their vector argument (sameLabels), those less le (histogram_quantile), or none (a
// scalar, or a vector without labels).
var functions = map[string]resultLabels{
	"abs": sameLabels, "ceil": sameLabels, "floor": sameLabels, "round": sameLabels, "exp": sameLabels,
	"ln": sameLabels, "log2": sameLabels, "log10": sameLabels, "sqrt": sameLabels, "sgn": sameLabels,
	"clamp": sameLabels, "clamp_min": sameLabels, "clamp_max": sameLabels,
	"rate": sameLabels, "irate": sameLabels, "increase": sameLabels, "delta": sameLabels, "idelta": sameLabels,
	"deriv": sameLabels, "predict_linear": sameLabels, "resets": sameLabels, "changes": sameLabels,
	"avg_over_time": sameLabels, "min_over_time": sameLabels, "max_over_time": sameLabels, "sum_over_time": sameLabels,
	"count_over_time": sameLabels, "last_over_time": sameLabels, "present_over_time": sameLabels,
	"quantile_over_time": sameLabels, "stddev_over_time": sameLabels, "stdvar_over_time": sameLabels,
	"timestamp": sameLabels, "sort": sameLabels, "sort_desc": sameLabels,
	"histogram_quantile": withoutLe,
	"time":               noLabels, "vector": noLabels, "scalar": noLabels, "absent": noLabels, "absent_over_time": noLabels,
}

type resultLabels int

const (
	sameLabels resultLabels = iota
	withoutLe
	noLabels
)

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
func (c *checker) require(set labelSet, ls []string, what string, n *node) {
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
// carry labels (nil: any label, for a metric no component serves or an expression the check
// does not read, already reported).
type value struct {
	scalar bool
	labels labelSet
}

// vectorArg is the vector among args (the others are scalars and strings); a vector without
// labels when there is none.
func (c *checker) vectorArg(args []*node) value {
	v := value{labels: labelSet{}}
	for _, a := range args {
		if r := c.eval(a); !r.scalar {
			v = r
		}
	}
	return v
}

// eval returns what n yields, and reports what n reads that is not served.
func (c *checker) eval(n *node) value {
	switch n.Kind {
	case "literal":
		return value{scalar: true}
	case "selector":
		return value{labels: c.selector(n)}
	case "call":
		return c.call(n)
	case "aggregation":
		return c.aggregation(n)
	case "binary":
		return c.binary(n)
	}
	panic(fmt.Sprintf("promquery: unknown kind of expression %q", n.Kind))
}

func (c *checker) selector(s *node) labelSet {
	switch {
	case s.Metric == "":
		c.report("a selector without a metric name is not read (name the metric)")
		return nil
	case slices.Contains(s.Labels, "__name__"):
		c.report("a matcher on __name__ in the selector of %s is not read (name the metric)", s.Metric)
		return nil
	}
	served, ok := c.served[s.Metric]
	if !ok {
		c.report("no component serves %s", s.Metric)
		return nil
	}
	set := labelSet{}
	for l := range served {
		if slices.Contains(ScrapeLabels, l) {
			c.report("%s carries the label %s, which the scrape overwrites (the query would see exported_%s)", s.Metric, l, l)
		}
		set[l] = true
	}
	for _, l := range ScrapeLabels {
		set[l] = true
	}
	for _, l := range s.Labels {
		if !set[l] {
			c.report("no series of %s carries the label %s", s.Metric, l)
		}
	}
	return set
}

func (c *checker) call(n *node) value {
	arg := c.vectorArg(n.Args)
	result, ok := functions[n.Op]
	switch {
	case !ok:
		c.report("function %s is not one this check reads", n.Op)
		return value{}
	case n.Op == "time" || n.Op == "scalar":
		return value{scalar: true}
	case result == withoutLe:
		if arg.labels != nil && !arg.labels["le"] {
			c.report("histogram_quantile over %s, which has no label le", strings.Join(metrics(n), ", "))
		}
		return value{labels: without(arg.labels, "le")}
	case result == noLabels:
		return value{labels: labelSet{}}
	}
	return arg
}

func (c *checker) aggregation(n *node) value {
	in := c.vectorArg(n.Args).labels
	keeps, ok := aggregations[n.Op]
	if !ok {
		c.report("aggregation %s is not one this check reads", n.Op)
		return value{}
	}
	what := n.Op + " by (" + strings.Join(n.Grouping, ", ") + ")"
	if n.Without {
		what = n.Op + " without (" + strings.Join(n.Grouping, ", ") + ")"
	}
	c.require(in, n.Grouping, what, n)
	switch {
	case keeps:
		return value{labels: in}
	case n.Without:
		return value{labels: without(in, n.Grouping...)}
	}
	return value{labels: plus(labelSet{}, n.Grouping)}
}

// binary follows PromQL's vector matching: a comparison or arithmetic keeps the left side's
// labels (only the on labels, or all but the ignoring ones, when matched one-to-one), with
// group_left or group_right the many side's plus the included ones; and and unless keep the
// left side's, or both sides'. Between a scalar and a vector there is no matching (the parser
// refuses on and ignoring labels there), and the vector's labels are kept.
func (c *checker) binary(b *node) value {
	l, r := c.eval(b.Args[0]), c.eval(b.Args[1])
	if l.scalar || r.scalar {
		if !l.scalar {
			return l
		}
		return r
	}
	lhs, rhs := l.labels, r.labels
	c.matching(b, lhs, rhs)
	switch {
	case b.Op == "or":
		if lhs == nil || rhs == nil {
			return value{}
		}
		out := maps.Clone(lhs)
		maps.Copy(out, rhs)
		return value{labels: out}
	case b.Op == "and" || b.Op == "unless":
		return value{labels: lhs}
	case b.Group == "left":
		c.require(rhs, b.Include, b.Op+" group_left ("+strings.Join(b.Include, ", ")+")", b.Args[1])
		return value{labels: plus(lhs, b.Include)}
	case b.Group == "right":
		c.require(lhs, b.Include, b.Op+" group_right ("+strings.Join(b.Include, ", ")+")", b.Args[0])
		return value{labels: plus(rhs, b.Include)}
	case b.On:
		return value{labels: plus(labelSet{}, b.Matching)}
	}
	return value{labels: without(lhs, b.Matching...)}
}

// matching reports the on and ignoring labels of b that its sides do not carry: an on label
// must be on both sides, an ignoring label on one at least.
func (c *checker) matching(b *node, lhs, rhs labelSet) {
	if b.On {
		what := b.Op + " on (" + strings.Join(b.Matching, ", ") + ")"
		c.require(lhs, b.Matching, what, b.Args[0])
		c.require(rhs, b.Matching, what, b.Args[1])
		return
	}
	for _, l := range b.Matching {
		if lhs != nil && rhs != nil && !lhs[l] && !rhs[l] {
			c.report("%s ignoring (%s): neither side carries the label %s", b.Op, strings.Join(b.Matching, ", "), l)
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
func metrics(n *node) []string {
	set := map[string]bool{}
	addMetrics(set, n)
	return slices.Sorted(maps.Keys(set))
}

func addMetrics(set map[string]bool, n *node) {
	if n.Metric != "" {
		set[n.Metric] = true
	}
	for _, a := range n.Args {
		addMetrics(set, a)
	}
}

// Metrics are the metric names the queries select, sorted; a query the parser refused adds
// none.
func Metrics(queries []Parsed) []string {
	set := map[string]bool{}
	for _, q := range queries {
		if q.tree != nil {
			addMetrics(set, q.tree)
		}
	}
	return slices.Sorted(maps.Keys(set))
}
