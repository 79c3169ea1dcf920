package gate

import (
	"os"
	"testing"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	celast "cel.dev/cel-go/common/ast"
	exprpb "google.golang.org/genproto/googleapis/api/expr/v1alpha1"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/intutic/gate-operator/internal/gate/checkedwire"
)

// wireExpressions cover every kind of expression and type the checked rules file can hold:
// literals of each kind, lists, maps, selections, presence tests, calls and member calls,
// comprehensions, the call's view, the caller, and the path, URL and
// network functions with their opaque types.
var wireExpressions = []string{
	`true`,
	`null == input.x`,
	`input.n == 3 || input.n == -4 || input.u == 7u || input.d == 2.5 || input.d == -0.0`,
	`input.s == "a\nb" && b"\x00\xff" != b"" && input.s in ["x", "y"]`,
	`{"a": 1, "b": 2}[input.k] == 1`,
	`has(input.file_path) && input.file_path.startsWith("/etc")`,
	`input.edits.exists(e, e.new_string.contains("secret"))`,
	`input.edits.all(e, has(e.old_string)) && input.edits.exists_one(e, true)`,
	`input.items.map(x, x.size()).filter(n, n > 2).size() > 0`,
	`type(input.x) == string || type(input.x) == list || type(type(1)) == type`,
	`dyn(input.n) == 1 ? tool == "Bash" : surface != "hook"`,
	`"x".upperAscii().lowerAscii() == "x" && input.s.split(",").size() < 3`,
	`call.commands.exists(c, c.name == "rm" && c.args.exists(a, a.startsWith("-") && a.contains("r")) && c.args.exists(a, !a.startsWith("-") && !path.resolve(c.cwd, a).isUnder("/workspace")))`,
	`!call.shellKnown`,
	`call.writes.exists(p, !p.isUnder("/workspace"))`,
	`call.hosts.exists(h, h != "pkg.go.dev" && !h.endsWith(".github.com"))`,
	`call.urls.exists(u, url(u).getScheme() != "https" || url(u).getHostname() == "169.254.169.254")`,
	`isIP(input.host) && ip(input.host).family() == 4 && cidr("10.0.0.0/8").containsIP(ip(input.host))`,
	`path.clean(input.p) == "/" && path.resolve("/w", input.p).isUnder("/w")`,
	`caller.namespace == "agents" && caller.serviceAccount.startsWith("agents/")`,
	`[1, 2, 3].map(x, x * 2)[0] == 2 && [[1], [2]].exists(l, l.size() == 1)`,
	`{"k": [1u, 2u]}.k[1] == 2u && size({1: "a"}) == 1`,
	`input.n > 1 &&
  input.n < 10 &&
  input.s.matches("^a+$")`,
}

// sampleExpressions are the whens of the sample policies.
func sampleExpressions(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, f := range []string{"../../config/samples/gate_v1alpha1_harnessagentpolicy.yaml"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Spec struct {
				Rules []struct {
					When string `json:"when"`
				} `json:"rules"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Spec.Rules {
			if r.When != "" {
				out = append(out, r.When)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no sample expressions")
	}
	return out
}

// checkedWire compiles when as the operator does and returns its serialized CheckedExpr, as
// the checked rules file holds it, and the message.
func checkedWire(t testing.TB, when string) ([]byte, *exprpb.CheckedExpr) {
	t.Helper()
	_, asts, errs := compileSource([]Rule{{Name: "r", When: when, Action: Block, Reason: "r"}})
	if len(errs) > 0 {
		t.Fatalf("%s: %v", when, errs)
	}
	pb, err := cel.AstToCheckedExpr(asts[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	return b, pb
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

// TestCheckedWireAgreesWithProtobuf: every expression of the corpus and of the sample policy,
// checked as the operator checks it, is read by checkedwire.Decode (none is left to the
// protobuf path) into the AST cel-go's own reading gives, and the programs planned from both
// decide alike.
func TestCheckedWireAgreesWithProtobuf(t *testing.T) {
	for _, when := range append(wireExpressions, sampleExpressions(t)...) {
		b, pb := checkedWire(t, when)
		got, err := checkedwire.Decode(b, when)
		if err != nil {
			t.Errorf("%s: not read: %v", when, err)
			continue
		}
		if !got.IsChecked() {
			t.Errorf("%s: read as not checked", when)
		}
		back, err := celast.ToProto(got)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(back, pb) {
			t.Errorf("%s: read otherwise than written:\n got %v\nwant %v", when, back, pb)
		}
		want, err := viaProtobuf(b, when)
		if err != nil {
			t.Fatal(err)
		}
		if !sameAST(t, got, want) {
			t.Errorf("%s: differs from cel-go's reading", when)
		}
	}
}
