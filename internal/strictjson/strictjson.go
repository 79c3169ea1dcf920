// Package strictjson decodes JSON that JavaScript wrote as that JavaScript reads it: field names
// match exactly, a field appears at most once, and nothing but whitespace follows the value.
package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	sigsjson "sigs.k8s.io/json"
)

// ErrTrailingData is Decode's error for data after the JSON value.
var ErrTrailingData = errors.New("data after the JSON value")

// Decode decodes data, one JSON value, into v, refusing whatever the JavaScript that wrote it
// could read differently: field names match exactly (encoding/json would also take "Tool" for
// "tool"), a field appears at most once, unknown fields are errors, and nothing but whitespace
// follows the value. v must hold typed fields only: a free-form value belongs in a
// json.RawMessage, decoded by its reader (gate.RenderRawInput), because a number decoded here
// into an interface would become an int64 instead of JavaScript's float64.
func Decode(data []byte, v any) error {
	return decode(data, v, false)
}

// DecodeIgnoringUnknown is Decode, letting fields the struct does not declare through
// (ignored), for a producer that adds fields between releases; a field named like a declared
// one in another case is still an error.
func DecodeIgnoringUnknown(data []byte, v any) error {
	return decode(data, v, true)
}

func decode(data []byte, v any, allowUnknown bool) error {
	opts := []sigsjson.StrictOption{sigsjson.DisallowDuplicateFields}
	if !allowUnknown {
		opts = append(opts, sigsjson.DisallowUnknownFields)
	}
	// The decoder checks the whole of data first, so trailing data is a syntax error.
	strictErrs, err := sigsjson.UnmarshalStrict(data, v, opts...)
	if err != nil {
		if isSyntax, _ := sigsjson.SyntaxErrorOffset(err); isSyntax && strings.Contains(err.Error(), "after top-level value") {
			return ErrTrailingData
		}
		return err
	}
	if len(strictErrs) > 0 {
		return strictErrs[0]
	}
	if allowUnknown {
		return checkFieldCase(data, reflect.TypeOf(v), "")
	}
	return nil // an unknown field, however it is spelled, was refused above
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// checkFieldCase reports an object key that names a field of t only when case is ignored. It
// follows nested structs, slices and maps; values that decode themselves are left alone.
func checkFieldCase(data []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return nil // null, or not an object: the decoder has judged it
		}
		fields := jsonFields(t)
		for key, raw := range obj {
			if ft, ok := fields[key]; ok {
				if err := checkFieldCase(raw, ft, path+key+"."); err != nil {
					return err
				}
				continue
			}
			for name := range fields {
				if strings.EqualFold(key, name) {
					return fmt.Errorf("json: field %q is not %q: field names are case-sensitive", path+key, path+name)
				}
			}
		}
	case reflect.Slice, reflect.Array:
		var elems []json.RawMessage
		if json.Unmarshal(data, &elems) != nil {
			return nil
		}
		for _, e := range elems {
			if err := checkFieldCase(e, t.Elem(), path); err != nil {
				return err
			}
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			return nil
		}
		for k, e := range m {
			if err := checkFieldCase(e, t.Elem(), path+k+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields maps the JSON names of a struct's fields to their types, flattening embedded
// structs as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for n, typ := range jsonFields(ft) {
					if _, taken := out[n]; !taken {
						out[n] = typ
					}
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
