// Command promql-refs reads PromQL expressions with Prometheus's own parser and prints what
// internal/promquery checks of each: the metric and the matchers' labels of every selector,
// and the labels each aggregation groups by and each binary operation matches on, as a tree
// that says how labels flow from the selectors to the result. It is a module of its own, so
// the product does not depend on the Prometheus server's module; `make tools` builds it into
// bin/, and the tests build it there when it is missing or older than its sources.
//
// It reads a JSON array of expressions on stdin and writes a JSON array on stdout, one object
// for each expression in order: {"expr": ..., "tree": ...}, or {"expr": ..., "error": ...} when
// the parser refuses the expression, the error naming it. It exits 1 only when stdin is not a
// JSON array of strings.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// result is what is printed for one expression.
type result struct {
	Expr  string `json:"expr"`
	Tree  *node  `json:"tree,omitempty"`
	Error string `json:"error,omitempty"`
}

// node is an expression as internal/promquery reads it. A range, a subquery, parentheses, a
// unary sign, offset and @ change no label name, so each of them is printed as its operand.
type node struct {
	// Kind is selector, literal (a number or a string), call, aggregation or binary.
	Kind string `json:"kind"`
	// Metric is a selector's metric name, empty when it names none outside its braces.
	Metric string `json:"metric,omitempty"`
	// Labels are the label names of a selector's matchers; __name__ is among them only when
	// a matcher on it is not the metric name's own.
	Labels []string `json:"labels,omitempty"`
	// Op is a call's function, or an aggregation's or a binary operation's operator.
	Op string `json:"op,omitempty"`
	// Args are a call's arguments, an aggregation's (its parameter first), or a binary
	// operation's two sides.
	Args []*node `json:"args,omitempty"`
	// Grouping are an aggregation's by labels, or its without labels.
	Grouping []string `json:"grouping,omitempty"`
	Without  bool     `json:"without,omitempty"`
	// On says whether Matching are a binary operation's on labels or its ignoring labels.
	On       bool     `json:"on,omitempty"`
	Matching []string `json:"matching,omitempty"`
	// Group is left or right for group_left or group_right, whose labels are Include.
	Group   string   `json:"group,omitempty"`
	Include []string `json:"include,omitempty"`
}

func main() {
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintf(os.Stderr, "promql-refs: stdin is not a JSON array of PromQL expressions: %v\n", err)
		os.Exit(1)
	}
	p := parser.NewParser(parser.Options{})
	out := make([]result, len(exprs))
	for i, expr := range exprs {
		out[i] = read(p, expr)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "promql-refs: %v\n", err)
		os.Exit(1)
	}
}

// read parses expr; its result names expr when the parser refuses it.
func read(p parser.Parser, expr string) result {
	e, err := p.ParseExpr(expr)
	if err == nil {
		var n *node
		if n, err = tree(e); err == nil {
			return result{Expr: expr, Tree: n}
		}
	}
	return result{Expr: expr, Error: fmt.Sprintf("%v in %q", err, expr)}
}

// tree is e as internal/promquery reads it.
func tree(e parser.Expr) (*node, error) {
	switch e := e.(type) {
	case *parser.NumberLiteral, *parser.StringLiteral:
		return &node{Kind: "literal"}, nil
	case *parser.VectorSelector:
		return selector(e), nil
	case *parser.MatrixSelector:
		return tree(e.VectorSelector)
	case *parser.SubqueryExpr:
		return tree(e.Expr)
	case *parser.ParenExpr:
		return tree(e.Expr)
	case *parser.UnaryExpr:
		return tree(e.Expr)
	case *parser.StepInvariantExpr:
		return tree(e.Expr)
	case *parser.Call:
		args, err := trees(e.Args...)
		return &node{Kind: "call", Op: e.Func.Name, Args: args}, err
	case *parser.AggregateExpr:
		operands := []parser.Expr{e.Expr}
		if e.Param != nil {
			operands = []parser.Expr{e.Param, e.Expr}
		}
		args, err := trees(operands...)
		return &node{Kind: "aggregation", Op: e.Op.String(), Args: args, Grouping: e.Grouping, Without: e.Without}, err
	case *parser.BinaryExpr:
		return binary(e)
	}
	return nil, fmt.Errorf("promql-refs does not read a %T", e)
}

func trees(es ...parser.Expr) ([]*node, error) {
	out := make([]*node, len(es))
	for i, e := range es {
		var err error
		if out[i], err = tree(e); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// selector lists the labels of s's matchers, less the one the parser adds for a metric name
// written outside the braces.
func selector(s *parser.VectorSelector) *node {
	n := &node{Kind: "selector", Metric: s.Name}
	own := s.Name != ""
	for _, m := range s.LabelMatchers {
		if own && m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual && m.Value == s.Name {
			own = false
			continue
		}
		n.Labels = append(n.Labels, m.Name)
	}
	return n
}

// binary is b with its vector matching, which the parser leaves out when a side is a scalar.
func binary(b *parser.BinaryExpr) (*node, error) {
	args, err := trees(b.LHS, b.RHS)
	n := &node{Kind: "binary", Op: b.Op.String(), Args: args}
	if m := b.VectorMatching; m != nil {
		n.On, n.Matching, n.Include = m.On, m.MatchingLabels, m.Include
		switch m.Card {
		case parser.CardManyToOne:
			n.Group = "left"
		case parser.CardOneToMany:
			n.Group = "right"
		}
	}
	return n, err
}
