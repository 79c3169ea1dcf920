// Package checkedwire reads a rule's checked expression from the checked rules file without
// protobuf-go.
//
// The file holds serialized google.api.expr.v1alpha1.CheckedExpr messages, and cel-go reads them
// through protobuf-go (proto.Unmarshal, then ast.ToAST, which converts every type and constant
// by marshalling it again into cel.dev/expr's messages). In a process that lives for one call,
// protobuf-go's first use of each message type builds its reflection tables: measured about a
// millisecond in gate-hook-cel, as much as the parse the file exists to save. Decode
// reads the same bytes with protowire into cel-go's native AST, as ast.ToAST builds it, and
// refuses whatever it does not read exactly as protobuf-go and ast.ToAST would (an unknown
// field, a field of the wrong wire type, a non-repeated field given twice, which protobuf
// merges, a constant or type ast.ToAST rejects, source information that does not describe the
// rule's text): the caller then takes the protobuf-go path, and past that the rule's source.
package checkedwire

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

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
