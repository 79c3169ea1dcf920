package checkedwire

import (
	"fmt"
	"slices"

	"cel.dev/cel-go/common"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"google.golang.org/protobuf/encoding/protowire"
)

// Decode reads a serialized CheckedExpr of the rule whose expression is when into
// the native checked AST ast.ToAST would build from it.
func Decode(b []byte, when string) (*celast.AST, error) {
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
