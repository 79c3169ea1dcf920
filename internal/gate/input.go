package gate

import (
	"encoding/json"
)

// RenderInput turns a tool input, as a runtime sends it, into the object the rules see as
// `input`: an object is used as is; a string holding JSON is parsed first; anything that is not
// an object after that becomes {"args": [value]}.
func RenderInput(v any) map[string]any {
	if s, ok := v.(string); ok {
		var parsed any
		if err := json.Unmarshal([]byte(s), &parsed); err == nil {
			v = parsed
		}
	}
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{"args": []any{v}}
}

// RenderRawInput renders a tool input still in its JSON encoding, such as the tool_input of a
// hook payload. Numbers keep their JSON text's value as float64, as in JavaScript.
func RenderRawInput(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return RenderInput(nil), nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return RenderInput(v), nil
}
