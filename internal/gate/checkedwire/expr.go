package checkedwire

import (
	"errors"

	celast "cel.dev/cel-go/common/ast"
	"google.golang.org/protobuf/encoding/protowire"
)

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
