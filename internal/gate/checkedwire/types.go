package checkedwire

import (
	"errors"
	"math"
	"slices"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"google.golang.org/protobuf/encoding/protowire"
)

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
