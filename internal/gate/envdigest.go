//go:build !nocel

package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/decls"
	"cel.dev/cel-go/common/types"
)

// envDigest is the digest of what a CEL environment declares, "sha256:<hex>": its libraries,
// its container, its variables and their types, its functions with every overload (ID,
// member or global, strictness, argument, result and parameter types), its macros, and the
// fields of every object type those name, as cel-go exposes them, each in a sorted order.
// A checked expression names overload IDs and types that only mean what the environment
// declared them to mean, so a checked rules file is bound to the digests of the environments
// it was checked in (checked.go): any declaration added, removed or changed gives another
// digest, and the file is not used by a build whose environment declares otherwise.
func envDigest(e *cel.Env) string {
	h := sha256.New()
	writeDeclarations(h, e)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// writeDeclarations writes what envDigest digests, one declaration a line.
func writeDeclarations(w io.Writer, e *cel.Env) {
	d := &declDigest{h: w, provider: e.CELTypeProvider(), seen: map[string]bool{}}
	libs := e.Libraries()
	slices.Sort(libs)
	for _, l := range libs {
		d.line("lib", l)
	}
	if e.Container != nil {
		d.line("container", e.Container.Name())
	}
	vars := e.Variables()
	slices.SortFunc(vars, func(a, b *decls.VariableDecl) int { return strings.Compare(a.Name(), b.Name()) })
	for _, v := range vars {
		d.line("var", v.Name(), d.typ(v.Type()))
	}
	fns := e.Functions()
	names := make([]string, 0, len(fns))
	for n := range fns {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fn := fns[n]
		d.line("func", n, strconv.FormatBool(fn.IsDeclarationDisabled()))
		overloads := fn.OverloadDecls()
		ids := make([]string, 0, len(overloads))
		byID := map[string]int{}
		for i, o := range overloads {
			ids, byID[o.ID()] = append(ids, o.ID()), i
		}
		slices.Sort(ids)
		for _, id := range ids {
			o := overloads[byID[id]]
			params := slices.Clone(o.TypeParams()) // in no fixed order
			slices.Sort(params)
			parts := []string{"overload", n, id, strconv.FormatBool(o.IsMemberFunction()), strconv.FormatBool(o.IsNonStrict()),
				strconv.Itoa(o.OperandTrait()), d.typ(o.ResultType()), strings.Join(params, ",")}
			for _, a := range o.ArgTypes() {
				parts = append(parts, d.typ(a))
			}
			d.line(parts...)
		}
	}
	macros := make([]string, 0, len(e.Macros()))
	for _, m := range e.Macros() {
		macros = append(macros, m.MacroKey())
	}
	slices.Sort(macros)
	for _, m := range macros {
		d.line("macro", m)
	}
	// Object types, in the order they were first named: the fields of each, which may name more.
	for i := 0; i < len(d.objects); i++ {
		name := d.objects[i]
		fields, ok := d.provider.FindStructFieldNames(name)
		if !ok {
			d.line("type", name, "opaque")
			continue
		}
		fields = slices.Clone(fields)
		slices.Sort(fields)
		for _, f := range fields {
			ft, ok := d.provider.FindStructFieldType(name, f)
			if !ok {
				d.line("field", name, f, "?")
				continue
			}
			d.line("field", name, f, d.typ(ft.Type))
		}
	}
}

type declDigest struct {
	h        io.Writer
	provider types.Provider
	seen     map[string]bool
	objects  []string // object type names, in the order first named
	buf      []byte
}

// line writes one declaration, each part length-prefixed so no two declarations write the same.
func (d *declDigest) line(parts ...string) {
	d.buf = d.buf[:0]
	for _, p := range parts {
		d.buf = strconv.AppendInt(d.buf, int64(len(p)), 10)
		d.buf = append(d.buf, ':')
		d.buf = append(d.buf, p...)
		d.buf = append(d.buf, ';')
	}
	d.buf = append(d.buf, '\n')
	_, _ = d.h.Write(d.buf) // a hash or a buffer: neither fails
}

// typ is t's name with its parameters, noting the object types it names.
func (d *declDigest) typ(t *types.Type) string {
	if t == nil {
		return "<nil>"
	}
	if t.Kind() == types.StructKind && !d.seen[t.TypeName()] {
		d.seen[t.TypeName()] = true
		d.objects = append(d.objects, t.TypeName())
	}
	for _, p := range t.Parameters() {
		d.typ(p)
	}
	return t.String()
}

// The digests of the two environments of the rules (compile_cel.go), computed once, when a
// checked rules file is first read or written (about a tenth of a millisecond each, measured;
// a process that plans no expression from the file pays nothing); "" when the
// environment cannot be built (then no checked file is used, and the rules fail as they would
// from their source).
var (
	baseEnvDigest = sync.OnceValue(func() string {
		env, err := baseEnvironment()
		if err != nil {
			return ""
		}
		return envDigest(env)
	})
	fullEnvDigest = sync.OnceValue(func() string {
		env, err := environment()
		if err != nil {
			return ""
		}
		return envDigest(env)
	})
)
