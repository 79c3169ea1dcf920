// Package promquerytest reads a test's PromQL with promquery.Parse and bin/promql-refs, built
// first from hack/promql-refs when it is missing or older than its sources.
package promquerytest

import (
	"testing"

	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/promquery"
	"github.com/intutic/gate-operator/internal/testutil"
)

// Parse reads the expressions of queries with bin/promql-refs under the repository's root (the
// directory of the go.mod above the test's). A tool that cannot be built or run fails the test;
// an expression Prometheus's parser refuses is left for promquery.Check to report.
func Parse(t testing.TB, queries []promquery.Query) []promquery.Parsed {
	t.Helper()
	root, err := apiservertest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tool, err := testutil.BuildTool(root, "promql-refs")
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := promquery.Parse(tool, queries)
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}
