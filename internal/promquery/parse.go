package promquery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
)

// node is an expression as the promql-refs tool prints it (hack/promql-refs says how): a
// selector, a literal, a call, an aggregation or a binary operation, with its operands in Args.
type node struct {
	Kind     string   `json:"kind"`
	Metric   string   `json:"metric"`
	Labels   []string `json:"labels"`
	Op       string   `json:"op"`
	Args     []*node  `json:"args"`
	Grouping []string `json:"grouping"`
	Without  bool     `json:"without"`
	On       bool     `json:"on"`
	Matching []string `json:"matching"`
	Group    string   `json:"group"`
	Include  []string `json:"include"`
}

// Parsed is a query with its expression as Prometheus's parser reads it.
type Parsed struct {
	Query
	tree *node
	// refused is the parser's error, naming the expression, when it has no tree.
	refused string
}

// Parse reads the expression of each query with tool, the promql-refs binary that
// `make tools` builds from hack/promql-refs: Prometheus's own parser, in a module of its own
// so that the product does not depend on the Prometheus server's. An expression the parser
// refuses is not an error here: Check reports it.
func Parse(tool string, queries []Query) ([]Parsed, error) {
	exprs := make([]string, len(queries))
	for i, q := range queries {
		exprs[i] = q.Expr
	}
	in, err := json.Marshal(exprs)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(tool)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		return nil, fmt.Errorf("%s: %w\n%s", tool, err, exit.Stderr)
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	var results []struct {
		Tree  *node  `json:"tree"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(out, &results); err != nil {
		return nil, fmt.Errorf("%s printed what is not its JSON: %w", tool, err)
	}
	if len(results) != len(queries) {
		return nil, fmt.Errorf("%s read %d expressions of %d", tool, len(results), len(queries))
	}
	parsed := make([]Parsed, len(queries))
	for i, r := range results {
		if r.Tree == nil && r.Error == "" {
			return nil, fmt.Errorf("%s printed neither a tree nor an error for %q", tool, queries[i].Expr)
		}
		parsed[i] = Parsed{Query: queries[i], tree: r.Tree, refused: r.Error}
	}
	return parsed, nil
}
