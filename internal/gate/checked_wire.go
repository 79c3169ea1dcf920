//go:build !nocel

package gate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"cel.dev/cel-go/common"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"google.golang.org/protobuf/encoding/protowire"
)

// Reading a rule's checked expression from the checked rules file without protobuf-go.
//
// The file holds serialized google.api.expr.v1alpha1.CheckedExpr messages, and cel-go reads them
// through protobuf-go (proto.Unmarshal, then ast.ToAST, which converts every type and constant
// by marshalling it again into cel.dev/expr's messages). In a process that lives for one call,
// protobuf-go's first use of each message type builds its reflection tables: measured about a
// millisecond in gate-hook-cel, as much as the parse the file exists to save. decodeCheckedWire
// reads the same bytes with protowire into cel-go's native AST, as ast.ToAST builds it, and
// refuses whatever it does not read exactly as protobuf-go and ast.ToAST would (an unknown
// field, a field of the wrong wire type, a non-repeated field given twice, which protobuf
// merges, a constant or type ast.ToAST rejects, source information that does not describe the
// rule's text): the caller then takes the protobuf-go path, and past that the rule's source.

// maxWireDepth bounds the nesting of expressions and types read, before cel-go's own limit on
// the loaded AST (250) is checked.
const maxWireDepth = 300

var errWire = errors.New("the checked expression is not in the form this reader takes")

// wireMsg reads one message's fields.
type wireMsg struct {
	b    []byte
	seen uint64 // non-repeated fields 1-63 already read
}

// next returns the next field, or ok false at the end; a malformed field is an error.
func (m *wireMsg) next() (num protowire.Number, typ protowire.Type, val []byte, v uint64, ok bool, err error) {
	if len(m.b) == 0 {
		return 0, 0, nil, 0, false, nil
	}
	num, typ, n := protowire.ConsumeTag(m.b)
	if n < 0 {
		return 0, 0, nil, 0, false, errWire
	}
	m.b = m.b[n:]
	switch typ {
	case protowire.VarintType:
		v, n = protowire.ConsumeVarint(m.b)
	case protowire.Fixed64Type:
		v, n = protowire.ConsumeFixed64(m.b)
	case protowire.BytesType:
		val, n = protowire.ConsumeBytes(m.b)
	default:
		return 0, 0, nil, 0, false, errWire
	}
	if n < 0 {
		return 0, 0, nil, 0, false, errWire
	}
	m.b = m.b[n:]
	return num, typ, val, v, true, nil
}

// once marks a non-repeated field read; a second occurrence (which protobuf would merge or
// let win) is refused.
func (m *wireMsg) once(num protowire.Number) error {
	if num < 1 || num > 63 || m.seen&(1<<num) != 0 {
		return errWire
	}
	m.seen |= 1 << num
	return nil
}

// fields calls f for every field of b, each non-repeated field (repeated false) at most once.
func fields(b []byte, repeated func(protowire.Number) bool, f func(num protowire.Number, typ protowire.Type, val []byte, v uint64) error) error {
	m := wireMsg{b: b}
	for {
		num, typ, val, v, ok, err := m.next()
		if err != nil || !ok {
			return err
		}
		if repeated == nil || !repeated(num) {
			if err := m.once(num); err != nil {
				return err
			}
		}
		if err := f(num, typ, val, v); err != nil {
			return err
		}
	}
}

func want(typ, is protowire.Type) error {
	if typ != is {
		return errWire
	}
	return nil
}

// decodeCheckedWire reads a serialized CheckedExpr of the rule whose expression is when into
// the native checked AST ast.ToAST would build from it.
func decodeCheckedWire(b []byte, when string) (*celast.AST, error) {
	d := wireDecoder{fac: celast.NewExprFactory()}
	refs := map[int64]*celast.ReferenceInfo{}
	typesOf := map[int64]*types.Type{}
	var root celast.Expr
	var info *celast.SourceInfo
	src := common.NewTextSource(when)
	err := fields(b, func(n protowire.Number) bool { return n == 2 || n == 3 }, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if err := want(typ, protowire.BytesType); err != nil {
			return err
		}
		switch num {
		case 2: // reference_map
			return mapEntry(val, protowire.BytesType, func(id int64, v []byte, _ uint64) error {
				r, err := d.reference(v)
				refs[id] = r
				return err
			})
		case 3: // type_map
			return mapEntry(val, protowire.BytesType, func(id int64, v []byte, _ uint64) error {
				t, err := d.typ(v, 0)
				typesOf[id] = t
				return err
			})
		case 4: // expr
			e, err := d.expr(val, 0)
			root = e
			return err
		case 5: // source_info
			i, err := d.sourceInfo(val, src)
			info = i
			return err
		case 6: // expr_version, not read by ast.ToAST
			var version string
			return text(val, &version)
		}
		return errWire
	})
	if err != nil {
		return nil, err
	}
	if root == nil {
		root = d.fac.NewUnspecifiedExpr(0)
	}
	if info == nil {
		// ast.ToAST reads a missing source_info as an empty one, which does not describe the text.
		return nil, errWire
	}
	a := celast.NewCheckedAST(celast.NewAST(root, info), typesOf, refs)
	if celast.ExceedsDepth(a, 250) {
		return nil, errWire
	}
	return a, nil
}

// mapEntry reads an entry of a map<int64, V>: key 1, value 2 of wire type valueType, handed
// to f as its bytes (nil when absent) or its varint (0 when absent).
func mapEntry(b []byte, valueType protowire.Type, f func(key int64, val []byte, v uint64) error) error {
	var key int64
	var val []byte
	var x uint64
	err := fields(b, nil, func(num protowire.Number, typ protowire.Type, bytes []byte, varint uint64) error {
		switch num {
		case 1:
			key = int64(varint)
			return want(typ, protowire.VarintType)
		case 2:
			val, x = bytes, varint
			return want(typ, valueType)
		}
		return errWire
	})
	if err != nil {
		return err
	}
	return f(key, val, x)
}

type wireDecoder struct {
	fac celast.ExprFactory
}

// reference reads a Reference: name 1, overload_id 3 (repeated), value 4.
func (d *wireDecoder) reference(b []byte) (*celast.ReferenceInfo, error) {
	r := &celast.ReferenceInfo{}
	err := fields(b, func(n protowire.Number) bool { return n == 3 }, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if err := want(typ, protowire.BytesType); err != nil {
			return err
		}
		switch num {
		case 1:
			return text(val, &r.Name)
		case 3:
			var id string
			err := text(val, &id)
			r.OverloadIDs = append(r.OverloadIDs, id)
			return err
		case 4:
			v, err := constant(val)
			r.Value = v
			return err
		}
		return errWire
	})
	return r, err
}

// constant reads a Constant as ast.ToAST does: the scalar kinds, nothing else.
func constant(b []byte) (ref.Val, error) {
	var out ref.Val
	err := fields(b, nil, func(num protowire.Number, typ protowire.Type, val []byte, v uint64) error {
		if out != nil { // two members of the oneof: protobuf keeps the last
			return errWire
		}
		switch num {
		case 1: // null_value
			out = types.NullValue
			return want(typ, protowire.VarintType)
		case 2:
			out = types.Bool(v != 0)
			return want(typ, protowire.VarintType)
		case 3:
			out = types.Int(int64(v))
			return want(typ, protowire.VarintType)
		case 4:
			out = types.Uint(v)
			return want(typ, protowire.VarintType)
		case 5:
			out = types.Double(math.Float64frombits(v))
			return want(typ, protowire.Fixed64Type)
		case 6:
			var s string
			err := errors.Join(want(typ, protowire.BytesType), text(val, &s))
			out = types.String(s)
			return err
		case 7:
			out = types.Bytes(slices.Clone(val))
			return want(typ, protowire.BytesType)
		}
		return errWire // duration and timestamp constants: ast.ToAST refuses them too
	})
	if err == nil && out == nil {
		return nil, errWire // a Constant with no kind: ast.ToAST refuses it
	}
	return out, err
}

// typ reads a Type as types.AlphaProtoAsType does: exactly one member of its oneof.
func (d *wireDecoder) typ(b []byte, depth int) (*types.Type, error) {
	if depth > maxWireDepth {
		return nil, errWire
	}
	var out *types.Type
	err := fields(b, nil, func(num protowire.Number, typ protowire.Type, val []byte, v uint64) error {
		if out != nil {
			return errWire
		}
		var err error
		if typ == protowire.VarintType {
			out, err = scalarType(num, v)
		} else {
			out, err = d.compositeType(num, typ, val, depth)
		}
		return err
	})
	if err == nil && out == nil {
		return nil, errWire
	}
	return out, err
}

// scalarType reads the members of Type that are enums: null 2, primitive 3, wrapper 4,
// well_known 5.
func scalarType(num protowire.Number, v uint64) (*types.Type, error) {
	switch num {
	case 2:
		return types.NullType, nil
	case 3:
		return primitive(v)
	case 4:
		p, err := primitive(v)
		if err != nil {
			return nil, err
		}
		return types.NewNullableType(p), nil
	case 5:
		switch v {
		case 1:
			return types.AnyType, nil
		case 2:
			return types.TimestampType, nil
		case 3:
			return types.DurationType, nil
		}
	}
	return nil, errWire
}

// compositeType reads the members of Type that are messages or strings: dyn 1, list_type 6,
// map_type 7, message_type 9, type_param 10, type 11, error 12, abstract_type 14. Function
// types (8) are refused, as ast.ToAST refuses them.
func (d *wireDecoder) compositeType(num protowire.Number, typ protowire.Type, val []byte, depth int) (*types.Type, error) {
	if typ != protowire.BytesType {
		return nil, errWire
	}
	switch num {
	case 1:
		return types.DynType, emptyMessage(val)
	case 12:
		return types.ErrorType, emptyMessage(val)
	case 9:
		var name string
		if err := text(val, &name); err != nil {
			return nil, err
		}
		return types.NewObjectType(name), nil
	case 10:
		var name string
		if err := text(val, &name); err != nil {
			return nil, err
		}
		return types.NewTypeParamType(name), nil
	case 11:
		if len(val) == 0 {
			return types.TypeType, nil
		}
		p, err := d.typ(val, depth+1)
		if err != nil {
			return nil, err
		}
		return types.NewTypeTypeWithParam(p), nil
	case 6, 7, 14:
		return d.parameterizedType(num, val, depth)
	}
	return nil, errWire
}

// parameterizedType reads list_type {elem_type 1}, map_type {key_type 1, value_type 2} and
// abstract_type {name 1, parameter_types 2 (repeated)}.
func (d *wireDecoder) parameterizedType(num protowire.Number, val []byte, depth int) (*types.Type, error) {
	var name string
	var params []*types.Type   // abstract_type's parameter_types
	var byField [3]*types.Type // list_type's and map_type's fields
	err := fields(val, func(n protowire.Number) bool { return num == 14 && n == 2 }, func(n protowire.Number, t protowire.Type, v []byte, _ uint64) error {
		if t != protowire.BytesType || n < 1 || n > 2 || (num == 6 && n != 1) {
			return errWire
		}
		if num == 14 && n == 1 {
			return text(v, &name)
		}
		p, err := d.typ(v, depth+1)
		if num == 14 {
			params = append(params, p)
		} else {
			byField[n] = p
		}
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case num == 6 && byField[1] != nil:
		return types.NewListType(byField[1]), nil
	case num == 7 && byField[1] != nil && byField[2] != nil:
		return types.NewMapType(byField[1], byField[2]), nil
	case num == 14:
		return types.NewOpaqueType(name, params...), nil
	}
	return nil, errWire
}

// text reads a string field, which proto3 requires to be UTF-8.
func text(v []byte, dst *string) error {
	if !utf8.Valid(v) {
		return errWire
	}
	*dst = string(v)
	return nil
}

func emptyMessage(val []byte) error {
	if len(val) != 0 {
		return errWire
	}
	return nil
}

func primitive(v uint64) (*types.Type, error) {
	switch v {
	case 1:
		return types.BoolType, nil
	case 2:
		return types.IntType, nil
	case 3:
		return types.UintType, nil
	case 4:
		return types.DoubleType, nil
	case 5:
		return types.StringType, nil
	case 6:
		return types.BytesType, nil
	}
	return nil, errWire
}

// exprOrUnspecified reads an optional sub-expression: a missing one is, as in ast.ToAST, an
// unspecified expression with id 0.
func (d *wireDecoder) exprOrUnspecified(b []byte, present bool, depth int) (celast.Expr, error) {
	if !present {
		return d.fac.NewUnspecifiedExpr(0), nil
	}
	return d.expr(b, depth)
}

// expr reads an Expr: id 2 and one of const 3, ident 4, select 5, call 6, list 7, struct 8,
// comprehension 9.
func (d *wireDecoder) expr(b []byte, depth int) (celast.Expr, error) {
	if depth > maxWireDepth {
		return nil, errWire
	}
	var id int64
	var kind protowire.Number
	var body []byte
	err := fields(b, nil, func(num protowire.Number, typ protowire.Type, val []byte, v uint64) error {
		if num == 2 {
			id = int64(v)
			return want(typ, protowire.VarintType)
		}
		if num < 3 || num > 9 || kind != 0 {
			return errWire
		}
		kind, body = num, val
		return want(typ, protowire.BytesType)
	})
	if err != nil {
		return nil, err
	}
	switch kind {
	case 0:
		return d.fac.NewUnspecifiedExpr(id), nil
	case 3:
		v, err := constant(body)
		if err != nil {
			return nil, err
		}
		return d.fac.NewLiteral(id, v), nil
	case 4:
		var name string
		err := fields(body, nil, func(n protowire.Number, t protowire.Type, v []byte, _ uint64) error {
			if n != 1 {
				return errWire
			}
			return errors.Join(want(t, protowire.BytesType), text(v, &name))
		})
		if err != nil {
			return nil, err
		}
		return d.fac.NewIdent(id, name), nil
	case 5:
		return d.selectExpr(id, body, depth)
	case 6:
		return d.call(id, body, depth)
	case 7:
		return d.list(id, body, depth)
	case 8:
		return d.structExpr(id, body, depth)
	default: // 9
		return d.comprehension(id, body, depth)
	}
}

// selectExpr reads a Select: operand 1, field 2, test_only 3.
func (d *wireDecoder) selectExpr(id int64, b []byte, depth int) (celast.Expr, error) {
	var operand []byte
	var hasOperand, test bool
	var field string
	err := fields(b, nil, func(n protowire.Number, t protowire.Type, v []byte, x uint64) error {
		switch n {
		case 1:
			operand, hasOperand = v, true
			return want(t, protowire.BytesType)
		case 2:
			return errors.Join(want(t, protowire.BytesType), text(v, &field))
		case 3:
			test = x != 0
			return want(t, protowire.VarintType)
		}
		return errWire
	})
	if err != nil {
		return nil, err
	}
	op, err := d.exprOrUnspecified(operand, hasOperand, depth+1)
	if err != nil {
		return nil, err
	}
	if test {
		return d.fac.NewPresenceTest(id, op, field), nil
	}
	return d.fac.NewSelect(id, op, field), nil
}

// call reads a Call: target 1, function 2, args 3 (repeated).
func (d *wireDecoder) call(id int64, b []byte, depth int) (celast.Expr, error) {
	var target celast.Expr
	var function string
	var args []celast.Expr
	err := fields(b, func(n protowire.Number) bool { return n == 3 }, func(n protowire.Number, t protowire.Type, v []byte, _ uint64) error {
		if err := want(t, protowire.BytesType); err != nil {
			return err
		}
		var err error
		switch n {
		case 1:
			target, err = d.expr(v, depth+1)
			return err
		case 2:
			return text(v, &function)
		case 3:
			a, err := d.expr(v, depth+1)
			args = append(args, a)
			return err
		}
		return errWire
	})
	if err != nil {
		return nil, err
	}
	if args == nil {
		args = []celast.Expr{}
	}
	if target == nil {
		return d.fac.NewCall(id, function, args...), nil
	}
	return d.fac.NewMemberCall(id, function, target, args...), nil
}

// list reads a CreateList: elements 1 (repeated), optional_indices 2 (repeated int32, packed
// or not).
func (d *wireDecoder) list(id int64, b []byte, depth int) (celast.Expr, error) {
	elems := []celast.Expr{}
	var optional []int32
	err := fields(b, func(n protowire.Number) bool { return n == 1 || n == 2 }, func(n protowire.Number, t protowire.Type, v []byte, x uint64) error {
		switch n {
		case 1:
			if err := want(t, protowire.BytesType); err != nil {
				return err
			}
			e, err := d.expr(v, depth+1)
			elems = append(elems, e)
			return err
		case 2:
			var err error
			optional, err = appendInt32s(optional, t, v, x)
			return err
		}
		return errWire
	})
	if err != nil {
		return nil, err
	}
	return d.fac.NewList(id, elems, optional), nil
}

// appendInt32s appends a repeated int32 field's value: one varint, or a packed run.
func appendInt32s(out []int32, t protowire.Type, v []byte, x uint64) ([]int32, error) {
	switch t {
	case protowire.VarintType:
		return append(out, int32(x)), nil
	case protowire.BytesType:
		for len(v) > 0 {
			x, n := protowire.ConsumeVarint(v)
			if n < 0 {
				return nil, errWire
			}
			out, v = append(out, int32(x)), v[n:]
		}
		return out, nil
	}
	return nil, errWire
}

// structExpr reads a CreateStruct: message_name 1, entries 2 (repeated). With a message name
// the entries are fields, without one they are map entries, as in ast.ToAST.
func (d *wireDecoder) structExpr(id int64, b []byte, depth int) (celast.Expr, error) {
	var message string
	var entries [][]byte
	err := fields(b, func(n protowire.Number) bool { return n == 2 }, func(n protowire.Number, t protowire.Type, v []byte, _ uint64) error {
		if err := want(t, protowire.BytesType); err != nil {
			return err
		}
		switch n {
		case 1:
			return text(v, &message)
		case 2:
			entries = append(entries, v)
			return nil
		}
		return errWire
	})
	if err != nil {
		return nil, err
	}
	out := make([]celast.EntryExpr, len(entries))
	for i, e := range entries {
		if out[i], err = d.entry(e, message != "", depth+1); err != nil {
			return nil, err
		}
	}
	if message != "" {
		return d.fac.NewStruct(id, message, out), nil
	}
	return d.fac.NewMap(id, out), nil
}

// entry reads an Entry: id 1, field_key 2 or map_key 3, value 4, optional_entry 5.
func (d *wireDecoder) entry(b []byte, field bool, depth int) (celast.EntryExpr, error) {
	var id int64
	var key string
	var mapKey, value []byte
	var hasMapKey, hasValue, optional, keyed bool
	err := fields(b, nil, func(n protowire.Number, t protowire.Type, v []byte, x uint64) error {
		switch n {
		case 1:
			id = int64(x)
			return want(t, protowire.VarintType)
		case 2, 3:
			if keyed { // both members of the key oneof
				return errWire
			}
			keyed = true
			if n == 2 {
				if err := text(v, &key); err != nil {
					return err
				}
			} else {
				mapKey, hasMapKey = v, true
			}
			return want(t, protowire.BytesType)
		case 4:
			value, hasValue = v, true
			return want(t, protowire.BytesType)
		case 5:
			optional = x != 0
			return want(t, protowire.VarintType)
		}
		return errWire
	})
	if err != nil {
		return nil, err
	}
	val, err := d.exprOrUnspecified(value, hasValue, depth)
	if err != nil {
		return nil, err
	}
	if field {
		return d.fac.NewStructField(id, key, val, optional), nil
	}
	k, err := d.exprOrUnspecified(mapKey, hasMapKey, depth)
	if err != nil {
		return nil, err
	}
	return d.fac.NewMapEntry(id, k, val, optional), nil
}

// comprehension reads a Comprehension: iter_var 1, iter_range 2, accu_var 3, accu_init 4,
// loop_condition 5, loop_step 6, result 7, iter_var2 8.
func (d *wireDecoder) comprehension(id int64, b []byte, depth int) (celast.Expr, error) {
	var names [9]string
	var parts [9][]byte
	var present [9]bool
	err := fields(b, nil, func(n protowire.Number, t protowire.Type, v []byte, _ uint64) error {
		if n < 1 || n > 8 {
			return errWire
		}
		switch n {
		case 1, 3, 8:
			if err := text(v, &names[n]); err != nil {
				return err
			}
		default:
			parts[n], present[n] = v, true
		}
		return want(t, protowire.BytesType)
	})
	if err != nil {
		return nil, err
	}
	var es [9]celast.Expr
	for _, n := range []int{2, 4, 5, 6, 7} {
		if es[n], err = d.exprOrUnspecified(parts[n], present[n], depth+1); err != nil {
			return nil, err
		}
	}
	return d.fac.NewComprehensionTwoVar(id, es[2], names[1], names[8], names[3], es[4], es[5], es[6], es[7]), nil
}

// sourceInfo reads a SourceInfo as ast.ToAST does, built on the rule's text: its location and
// line offsets must be the ones the text has, as when the operator checked it, and it carries
// no syntax version or extensions (the parser writes neither).
func (d *wireDecoder) sourceInfo(b []byte, src common.Source) (*celast.SourceInfo, error) {
	info := celast.NewSourceInfo(src)
	var lines []int32
	err := fields(b, func(n protowire.Number) bool { return n == 3 || n == 4 || n == 5 }, func(n protowire.Number, t protowire.Type, v []byte, x uint64) error {
		switch n {
		case 2: // location
			if string(v) != src.Description() {
				return errWire
			}
			return want(t, protowire.BytesType)
		case 3: // line_offsets
			var err error
			lines, err = appendInt32s(lines, t, v, x)
			return err
		case 4: // positions: map<int64, int32>
			if err := want(t, protowire.BytesType); err != nil {
				return err
			}
			return mapEntry(v, protowire.VarintType, func(id int64, _ []byte, x uint64) error {
				info.SetOffsetRange(id, celast.OffsetRange{Start: int32(x), Stop: int32(x)})
				return nil
			})
		case 5: // macro_calls: map<int64, Expr>
			if err := want(t, protowire.BytesType); err != nil {
				return err
			}
			return mapEntry(v, protowire.BytesType, func(id int64, call []byte, _ uint64) error {
				e, err := d.exprOrUnspecified(call, call != nil, 0)
				if err == nil {
					info.SetMacroCall(id, e)
				}
				return err
			})
		}
		return errWire // syntax_version, extensions
	})
	if err != nil {
		return nil, err
	}
	if !slices.Equal(lines, src.LineOffsets()) {
		return nil, fmt.Errorf("%w: line offsets", errWire)
	}
	return info, nil
}
