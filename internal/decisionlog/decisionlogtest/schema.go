// Package decisionlogtest checks decision records against their JSON Schema, for the tests of
// every surface that writes them.
package decisionlogtest

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/intutic/gate-operator/internal/decisionlog"
)

var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(decisionlog.SchemaJSON))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const url = "decision-record.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
})

// Validate fails t unless line is one record that the schema admits, and returns it decoded.
func Validate(t testing.TB, line []byte) decisionlog.Record {
	t.Helper()
	sch, err := compiled()
	if err != nil {
		t.Fatalf("the decision record schema: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		t.Fatalf("a record that is not JSON: %v\n%s", err, line)
	}
	if err := sch.Validate(doc); err != nil {
		t.Fatalf("a record the schema refuses: %v\n%s", err, line)
	}
	var rec decisionlog.Record
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		t.Fatalf("a record decisionlog.Record does not read: %v\n%s", err, line)
	}
	return rec
}

// ValidateLines validates every record among lines (NDJSON, other lines ignored: a line is a
// record when it is JSON naming the schema) and returns them in order.
func ValidateLines(t testing.TB, lines string) []decisionlog.Record {
	t.Helper()
	var recs []decisionlog.Record
	for line := range strings.SplitSeq(lines, "\n") {
		if IsRecord([]byte(line)) {
			recs = append(recs, Validate(t, []byte(line)))
		}
	}
	return recs
}

// IsRecord reports whether line is JSON that names the decision record's schema.
func IsRecord(line []byte) bool {
	var probe struct {
		Schema string `json:"schema"`
	}
	return json.Unmarshal(line, &probe) == nil && probe.Schema == decisionlog.Schema
}
