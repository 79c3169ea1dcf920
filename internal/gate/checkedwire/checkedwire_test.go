package checkedwire

import (
	"testing"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/ext"
	exprpb "google.golang.org/genproto/googleapis/api/expr/v1alpha1"
	"google.golang.org/protobuf/proto"
)

// seedExpressions use only the variables and functions of the gate's base environment
// (internal/gate/compile_cel.go), which checkedWire declares as the gate does. The gate's
// differential test (TestCheckedWireAgreesWithProtobuf in internal/gate)
// covers the rest of the rule language and the sample policy.
var seedExpressions = []string{
	`true`,
	`null == input.x`,
	`input.n == 3 || input.n == -4 || input.u == 7u || input.d == 2.5 || input.d == -0.0`,
	`input.s == "a\nb" && b"\x00\xff" != b"" && input.s in ["x", "y"]`,
	`{"a": 1, "b": 2}[input.k] == 1`,
	`has(input.file_path) && input.file_path.startsWith("/etc")`,
	`input.edits.exists(e, e.new_string.contains("secret"))`,
	`input.edits.all(e, has(e.old_string)) && input.edits.exists_one(e, true)`,
}

// checkedWire checks when as the gate's base environment does and returns its serialized
// CheckedExpr, as the checked rules file holds it.
func checkedWire(t testing.TB, when string) []byte {
	t.Helper()
	env, err := cel.NewEnv(
		cel.Variable("tool", cel.StringType),
		cel.Variable("server", cel.StringType),
		cel.Variable("input", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("surface", cel.StringType),
		cel.Variable("session", cel.StringType),
		ext.Strings(),
	)
	if err != nil {
		t.Fatal(err)
	}
	a, iss := env.Compile(when)
	if iss.Err() != nil {
		t.Fatalf("%s: %v", when, iss.Err())
	}
	pb, err := cel.AstToCheckedExpr(a)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// viaProtobuf reads a serialized CheckedExpr as cel-go does.
func viaProtobuf(b []byte, when string) (*celast.AST, error) {
	var pb exprpb.CheckedExpr
	if err := proto.Unmarshal(b, &pb); err != nil {
		return nil, err
	}
	a, err := cel.CheckedExprToAstWithSource(&pb, common.NewTextSource(when))
	if err != nil {
		return nil, err
	}
	return a.NativeRep(), nil
}

func sameAST(t testing.TB, a, b *celast.AST) bool {
	t.Helper()
	pa, err := celast.ToProto(a)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := celast.ToProto(b)
	if err != nil {
		t.Fatal(err)
	}
	return proto.Equal(pa, pb)
}

// TestCheckedWireRefuses: what the reader does not read exactly as protobuf-go and cel-go
// would is refused, so the caller takes their path: a repeated non-repeated field (protobuf
// merges it), an unknown field, a wrong wire type, truncation, a syntax version, another text.
func TestCheckedWireRefuses(t *testing.T) {
	when := `input.edits.exists(e, e.new_string.contains("secret"))`
	b := checkedWire(t, when)
	for name, bad := range map[string][]byte{
		"the expression twice":       append(append([]byte{}, b...), b...),
		"an unknown field":           append(append([]byte{}, b...), 0x78, 0x01), // field 15, varint
		"expr as a varint":           append([]byte{0x20, 0x01}, b...),           // field 4, varint
		"truncated":                  b[:len(b)-1],
		"a syntax version":           append(append([]byte{}, b...), 0x2a, 0x03, 0x0a, 0x01, 'x'), // source_info{syntax_version:"x"}: a second source_info
		"empty":                      {},
		"an unterminated varint tag": {0x80},
	} {
		if _, err := Decode(bad, when); err == nil {
			t.Errorf("%s: read", name)
		}
	}
	if _, err := Decode(b, "true\n"+when); err == nil {
		t.Error("another text's line offsets are read")
	}
}

// FuzzCheckedWire: whatever bytes Decode reads, cel-go reads too, into the same AST.
func FuzzCheckedWire(f *testing.F) {
	for _, when := range seedExpressions {
		f.Add(checkedWire(f, when), when)
	}
	f.Fuzz(func(t *testing.T, b []byte, when string) {
		got, err := Decode(b, when)
		if err != nil {
			return
		}
		want, err := viaProtobuf(b, when)
		if err != nil {
			t.Fatalf("read here, refused by cel-go: %v", err)
		}
		if !sameAST(t, got, want) {
			t.Fatal("read otherwise than cel-go reads it")
		}
	})
}
