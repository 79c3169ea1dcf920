//go:build !nocel

package gate

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"

	"github.com/intutic/gate-operator/internal/shellparse"
)

// The CEL functions for what agents do, beside the standard library and the strings extension:
//
//   - paths (see internal/shellparse/paths.go): path.clean(p), path.resolve(base, p), path.base(p), path.dir(p),
//     path.isAbs(p) and p.isUnder(dir);
//   - URLs: url(s), isURL(s) and a URL's getScheme(), getHost(), getHostname(), getPort(),
//     getEscapedPath() and getQuery(), with the names and semantics of Kubernetes'
//     k8s.io/apiserver/pkg/cel/library URLs (ValidatingAdmissionPolicy's url library);
//   - IPs and CIDRs: cel-go's network extension (ext.Network), the port of Kubernetes' ip and
//     cidr libraries into cel-go: ip(s), isIP(s), ip.isCanonical(s), cidr(s), isCIDR(s),
//     family(), isLoopback(), isGlobalUnicast(), isLinkLocalMulticast(), isLinkLocalUnicast(),
//     isUnspecified(), containsIP(), containsCIDR(), ip(), masked(), prefixLength(), string().
//
// Kubernetes' libraries themselves cannot be used: they are written against
// github.com/google/cel-go, and the gate evaluates with cel.dev/cel-go (the same project under
// its new module path), whose types are distinct Go types, so their EnvOptions do not apply to
// this environment. Each function declares its cost (a scan of its string arguments), so the
// runtime cost limit bounds it like any standard function.

// callTypeName is the CEL name of CallView, as ext.NativeTypes names it.
const callTypeName = "gate.CallView"

// callLibrary is the environment options of the view, the caller (caller.go) and the functions
// above.
func callLibrary() []cel.EnvOption {
	return []cel.EnvOption{
		ext.NativeTypes(reflect.TypeFor[CallView](), reflect.TypeFor[shellparse.Command](), reflect.TypeFor[shellparse.Redirect](),
			reflect.TypeFor[Caller](), ext.ParseStructTags(true)),
		cel.Variable(varCall, cel.ObjectType(callTypeName)),
		cel.Variable(varCaller, cel.ObjectType(callerTypeName)),
		ext.Network(),
		cel.Lib(pathLibrary{}),
		cel.Lib(urlLibrary{}),
	}
}

type pathLibrary struct{}

func (pathLibrary) LibraryName() string { return "gate.intutic.io.path" }

func (pathLibrary) CompileOptions() []cel.EnvOption {
	str := cel.StringType
	unary := func(fn func(string) string) cel.OverloadOpt {
		return cel.UnaryBinding(func(v ref.Val) ref.Val { return types.String(fn(string(v.(types.String)))) })
	}
	return []cel.EnvOption{
		cel.Function("path.clean", cel.Overload("path_clean_string", []*cel.Type{str}, str, unary(shellparse.Clean))),
		cel.Function("path.base", cel.Overload("path_base_string", []*cel.Type{str}, str, unary(shellparse.Base))),
		cel.Function("path.dir", cel.Overload("path_dir_string", []*cel.Type{str}, str, unary(shellparse.Dir))),
		cel.Function("path.isAbs", cel.Overload("path_is_abs_string", []*cel.Type{str}, cel.BoolType,
			cel.UnaryBinding(func(v ref.Val) ref.Val { return types.Bool(strings.HasPrefix(string(v.(types.String)), "/")) }))),
		cel.Function("path.resolve", cel.Overload("path_resolve_string_string", []*cel.Type{str, str}, str,
			cel.BinaryBinding(func(base, p ref.Val) ref.Val {
				return types.String(shellparse.Resolve(string(base.(types.String)), string(p.(types.String))))
			}))),
		cel.Function("isUnder", cel.MemberOverload("string_is_under_string", []*cel.Type{str, str}, cel.BoolType,
			cel.BinaryBinding(func(p, dir ref.Val) ref.Val {
				return types.Bool(shellparse.IsUnder(string(p.(types.String)), string(dir.(types.String))))
			}))),
		cel.CostModel(
			scanArgs("path_clean_string", true, cost.Arg(0)),
			scanArgs("path_base_string", true, cost.Arg(0)),
			scanArgs("path_dir_string", true, cost.Arg(0)),
			cost.Overload("path_is_abs_string", cost.EvalCost(cost.Const(cost.CallCost))),
			scanArgs("path_resolve_string_string", true, cost.Arg(0), cost.Arg(1)),
			memberScan("string_is_under_string", cost.Target(), cost.Arg(0)),
		),
	}
}

func (pathLibrary) ProgramOptions() []cel.ProgramOption { return nil }

// scanArgs is the cost of a function that scans its arguments once; stringResult says it returns
// a string no longer than their sum, plus one.
func scanArgs(id string, stringResult bool, args ...cost.QuantityExpr) cost.OverloadModel {
	n := lengths(args)
	opts := []cost.OverloadModelOption{cost.EvalCost(cost.Sum(cost.Const(cost.CallCost), cost.StringScan(n)))}
	if stringResult {
		opts = append(opts, cost.ResultSize(cost.AtMost(cost.Sum(n, cost.Const(1)))))
	}
	return cost.Overload(id, opts...)
}

func memberScan(id string, args ...cost.QuantityExpr) cost.OverloadModel {
	return cost.MemberOverload(id, cost.EvalCost(cost.Sum(cost.Const(cost.CallCost), cost.StringScan(lengths(args)))))
}

func lengths(args []cost.QuantityExpr) cost.QuantityExpr {
	terms := make([]cost.QuantityExpr, len(args))
	for i, a := range args {
		terms[i] = cost.Length(a)
	}
	return cost.Sum(terms...)
}

// URLType is the CEL type of url(s).
var URLType = types.NewOpaqueType("net.URL")

// URL is a parsed URL, as Kubernetes' url library holds it.
type URL struct {
	*url.URL
	text string
}

// ConvertToNative implements ref.Val.
func (u URL) ConvertToNative(t reflect.Type) (any, error) {
	switch {
	case reflect.TypeOf(u.URL).AssignableTo(t):
		return u.URL, nil
	case reflect.TypeOf("").AssignableTo(t):
		return u.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'URL' to '%v'", t)
}

// ConvertToType implements ref.Val.
func (u URL) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case URLType:
		return u
	case types.TypeType:
		return URLType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", URLType, t)
}

// Equal implements ref.Val: URLs are equal when their strings are.
func (u URL) Equal(other ref.Val) ref.Val {
	o, ok := other.(URL)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(u.String() == o.String())
}

// Type implements ref.Val.
func (u URL) Type() ref.Type { return URLType }

// Value implements ref.Val.
func (u URL) Value() any { return u.URL }

// Size is the length of the text the URL was parsed from, so its methods cost by its length.
func (u URL) Size() ref.Val { return types.Int(len(u.text)) }

type urlLibrary struct{}

func (urlLibrary) LibraryName() string { return "gate.intutic.io.url" }

func (urlLibrary) CompileOptions() []cel.EnvOption {
	str := cel.StringType
	getter := func(id string, fn func(*url.URL) ref.Val) cel.FunctionOpt {
		return cel.MemberOverload(id, []*cel.Type{URLType}, str, cel.UnaryBinding(func(v ref.Val) ref.Val {
			u, ok := v.(URL)
			if !ok {
				return types.MaybeNoSuchOverloadErr(v)
			}
			return fn(u.URL)
		}))
	}
	text := func(fn func(*url.URL) string) func(*url.URL) ref.Val {
		return func(u *url.URL) ref.Val { return types.String(fn(u)) }
	}
	query := cel.MemberOverload("url_get_query", []*cel.Type{URLType}, cel.MapType(str, cel.ListType(str)),
		cel.UnaryBinding(func(v ref.Val) ref.Val {
			u, ok := v.(URL)
			if !ok {
				return types.MaybeNoSuchOverloadErr(v)
			}
			out := map[ref.Val]ref.Val{}
			for k, vs := range u.Query() {
				out[types.String(k)] = types.NewStringList(types.DefaultTypeAdapter, vs)
			}
			return types.NewRefValMap(types.DefaultTypeAdapter, out)
		}))
	return []cel.EnvOption{
		cel.Function("url", cel.Overload("string_to_url", []*cel.Type{str}, URLType, cel.UnaryBinding(stringToURL))),
		cel.Function("isURL", cel.Overload("is_url_string", []*cel.Type{str}, cel.BoolType, cel.UnaryBinding(func(v ref.Val) ref.Val {
			_, err := url.ParseRequestURI(string(v.(types.String)))
			return types.Bool(err == nil)
		}))),
		cel.Function("getScheme", getter("url_get_scheme", text(func(u *url.URL) string { return u.Scheme }))),
		cel.Function("getHost", getter("url_get_host", text(func(u *url.URL) string { return u.Host }))),
		cel.Function("getHostname", getter("url_get_hostname", text((*url.URL).Hostname))),
		cel.Function("getPort", getter("url_get_port", text((*url.URL).Port))),
		cel.Function("getEscapedPath", getter("url_get_escaped_path", text((*url.URL).EscapedPath))),
		cel.Function("getQuery", query),
		cel.CostModel(
			scanArgs("string_to_url", false, cost.Arg(0)),
			scanArgs("is_url_string", false, cost.Arg(0)),
			memberScan("url_get_scheme", cost.Target()),
			memberScan("url_get_host", cost.Target()),
			memberScan("url_get_hostname", cost.Target()),
			memberScan("url_get_port", cost.Target()),
			memberScan("url_get_escaped_path", cost.Target()),
			memberScan("url_get_query", cost.Target()),
		),
	}
}

func (urlLibrary) ProgramOptions() []cel.ProgramOption { return nil }

// stringToURL is Kubernetes' url(): the string must be an absolute URI or an absolute path
// (url.ParseRequestURI, the OpenAPI "uri" format), and is then parsed again with url.Parse,
// which reads a fragment correctly.
func stringToURL(v ref.Val) ref.Val {
	s := string(v.(types.String))
	if _, err := url.ParseRequestURI(s); err != nil {
		return types.NewErr("URL parse error during conversion from string: %v", err)
	}
	u, err := url.Parse(s)
	if err != nil {
		return types.NewErr("URL parse error during conversion from string: %v", err)
	}
	return URL{URL: u, text: s}
}

// callLibraryNames are the identifiers (variables, namespaces of functions and types) and the
// functions callLibrary declares; a test holds the list to the environment.
var callLibraryNames = map[string]bool{
	varCall: true, varCaller: true, "path": true, "ip": true, "net": true, "gate": true,
	"isUnder": true, "url": true, "isURL": true, "getScheme": true, "getHost": true, "getHostname": true,
	"getPort": true, "getEscapedPath": true, "getQuery": true, "cidr": true, "isIP": true, "isCIDR": true,
	"isCanonical": true, "family": true, "isLoopback": true, "isGlobalUnicast": true,
	"isLinkLocalMulticast": true, "isLinkLocalUnicast": true, "isUnspecified": true, "containsIP": true,
	"containsCIDR": true, "masked": true, "prefixLength": true, "isMask": true,
}

// usesCallLibrary reports whether a parsed expression names an identifier or calls a function
// of callLibrary ("path.clean(p)" parses as clean called on the identifier path).
func usesCallLibrary(e ast.Expr) bool {
	found := false
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.IdentKind:
			found = found || callLibraryNames[e.AsIdent()]
		case ast.CallKind:
			found = found || callLibraryNames[e.AsCall().FunctionName()]
		}
	}))
	return found
}
