package strictjson

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestDecode: Decode, which the snapshot and the gate API read with, refuses field names in
// another case, repeated and unknown fields, data after the value and numbers JavaScript reads
// as Infinity.
func TestDecode(t *testing.T) {
	type nested struct {
		Name string `json:"name"`
	}
	type doc struct {
		Tool  string          `json:"tool"`
		N     float64         `json:"n,omitempty"`
		Inner *nested         `json:"inner,omitempty"`
		Raw   json.RawMessage `json:"raw,omitempty"`
	}
	for _, bad := range []string{`{"tool":"a"}}`, `{"tool":"a"}]`, `{"tool":"a"} {}`, `{"Tool":"a"}`, `{"tool":"a","TOOL":"b"}`,
		`{"tool":"a","tool":"b"}`, `{"tool":"a","x":1}`, `{"tool":"a","inner":{"NAME":"b"}}`, `{"tool":"a","n":1e999}`} {
		var d doc
		if err := Decode([]byte(bad), &d); err == nil {
			t.Errorf("Decode accepted %s as %+v", bad, d)
		}
	}
	var d doc
	if err := Decode([]byte(" {\"tool\":\"a\",\"n\":3,\"inner\":{\"name\":\"b\"},\"raw\":{\"Any\":[1e300]}}\n\t"), &d); err != nil ||
		d.Tool != "a" || d.N != 3 || d.Inner.Name != "b" || string(d.Raw) != `{"Any":[1e300]}` {
		t.Fatalf("got %+v, %v", d, err)
	}
	if err := Decode([]byte(`{"tool":"a"}}`), &d); !errors.Is(err, ErrTrailingData) {
		t.Fatalf("trailing data: %v", err)
	}

}
