package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// RenderInput turns a tool input, as a runtime sends it, into the object the rules see as
// `input`: an object is used as is; a string is JSON-parsed first, as every runtime does with
// input carried as text (harness approval rows hold JSON.stringify output); anything that is
// not an object after that becomes {"args": [value]}.
//
// A string that does not decode is an error, never an argument: the gate cannot know what the
// runtime made of text it could not parse itself, and a value Go rejects but Node accepts (a
// number such as 1e999, which Node reads as Infinity, or nesting deeper than Go's decoder
// allows) would otherwise be judged as a different input from the one the tool receives. So
// plain text such as `ls -la` is refused too; the caller refuses the call with input_invalid.
// Errors never quote the input: their text reaches the audit log.
func RenderInput(v any) (map[string]any, error) {
	if s, ok := v.(string); ok {
		var parsed any
		if err := json.Unmarshal([]byte(s), &parsed); err != nil {
			return nil, undecodable(err)
		}
		v = parsed
	}
	if m, ok := v.(map[string]any); ok {
		return m, nil
	}
	return map[string]any{"args": []any{v}}, nil
}

// RenderRawInput renders a tool input still in its JSON encoding, such as the tool_input of a
// hook payload (see RenderInput). Numbers keep their JSON text's value as float64, as in
// JavaScript; an empty input renders as null.
func RenderRawInput(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return RenderInput(nil)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, undecodable(err)
	}
	return RenderInput(v)
}

// undecodable describes a decoding error of a tool input without quoting the input.
func undecodable(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se) && strings.Contains(se.Error(), "max depth"):
		return errors.New("the tool input is nested deeper than the gate can decode")
	case errors.As(err, &se):
		return fmt.Errorf("the tool input is not valid JSON (at byte %d)", se.Offset)
	case errors.As(err, &te):
		// Decoding into any, only a number can mismatch: one beyond the range of a float64.
		return errors.New("the tool input holds a number beyond the range of a float64")
	default:
		return errors.New("the tool input is not valid JSON")
	}
}
