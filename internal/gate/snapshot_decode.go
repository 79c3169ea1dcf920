package gate

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// decodeCanonical decodes a snapshot written the way Encode writes one: compact, its members in
// the declared order, empty optional members left out. It is what gate-hook pays on every call,
// and several times faster than strictjson.Decode, which reflects over every field. It accepts only
// text strictjson.Decode accepts and decodes to the same value; anything else (another member order,
// whitespace, an unknown or repeated member, an escape it does not read, deep nesting) returns
// false, and the caller decodes with strictjson.Decode, which judges the text and reports any error.
func decodeCanonical(data []byte) (*Snapshot, bool) {
	// One copy of the text: every string without escapes is a substring of it.
	d := canonicalDecoder{data: string(data)}
	s := &Snapshot{}
	if !d.byte('{') || !d.header(s) || !d.key(`"rules":`) || !d.rules(&s.Rules) {
		return nil, false
	}
	if d.byte(',') && !d.str(`"digest":`, &s.Digest) || !d.byte('}') || !d.onlySpace() {
		return nil, false
	}
	return s, true
}

// header decodes the members before the rules, and the comma after them.
func (d *canonicalDecoder) header(s *Snapshot) bool {
	return d.str(`"apiVersion":`, &s.APIVersion) && d.byte(',') &&
		d.str(`"kind":`, &s.Kind) && d.byte(',') &&
		d.str(`"policy":`, &s.Policy) && d.byte(',') &&
		d.int(`"generation":`, &s.Generation) && d.byte(',') &&
		d.optStr(`"workspaceID":`, &s.WorkspaceID) &&
		d.str(`"defaultAction":`, (*string)(&s.DefaultAction)) && d.byte(',') &&
		d.str(`"failurePolicy":`, (*string)(&s.FailurePolicy)) && d.byte(',') &&
		d.optStr(`"enforcement":`, (*string)(&s.Enforcement)) &&
		d.optStr(`"invalid":`, &s.Invalid)
}

// maxCanonicalDepth bounds the prefilter nesting decodeCanonical follows; deeper text goes to
// strictjson.Decode, whose own limit judges it.
const maxCanonicalDepth = 64

type canonicalDecoder struct {
	data string
	pos  int
}

func (d *canonicalDecoder) peek(c byte) bool { return d.pos < len(d.data) && d.data[d.pos] == c }

func (d *canonicalDecoder) byte(c byte) bool {
	if !d.peek(c) {
		return false
	}
	d.pos++
	return true
}

// key consumes a member's name and colon, written as `"name":`.
func (d *canonicalDecoder) key(k string) bool {
	if len(d.data)-d.pos < len(k) || d.data[d.pos:d.pos+len(k)] != k {
		return false
	}
	d.pos += len(k)
	return true
}

// has reports whether the member k comes next, without consuming it.
func (d *canonicalDecoder) has(k string) bool {
	return len(d.data)-d.pos >= len(k) && d.data[d.pos:d.pos+len(k)] == k
}

func (d *canonicalDecoder) str(k string, out *string) bool {
	return d.key(k) && d.stringValue(out)
}

// optStr decodes an omitempty string member and the comma after it, when it comes next.
func (d *canonicalDecoder) optStr(k string, out *string) bool {
	if !d.has(k) {
		return true
	}
	return d.str(k, out) && d.byte(',')
}

// stringValue decodes a JSON string as encoding/json does. Text with no escape is taken as it
// is, and the escapes Encode writes for quotes, backslashes and whitespace are read here; a \u
// escape is decoded by encoding/json. Invalid UTF-8 (which strictjson.Decode would replace) and
// control characters (which it refuses) are not accepted.
func (d *canonicalDecoder) stringValue(out *string) bool {
	if !d.byte('"') {
		return false
	}
	start := d.pos
	var buf []byte // the decoded text, once an escape is met
	for ; d.pos < len(d.data); d.pos++ {
		c := d.data[d.pos]
		switch {
		case c == '"':
			raw := d.data[start:d.pos]
			d.pos++
			if buf == nil {
				*out = raw
				return utf8.ValidString(raw)
			}
			if !utf8.Valid(buf) {
				return false
			}
			*out = string(buf)
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if buf == nil {
				buf = append(make([]byte, 0, 2*(d.pos-start)+16), d.data[start:d.pos]...)
			}
			if d.pos+1 == len(d.data) {
				return false
			}
			d.pos++
			switch e := d.data[d.pos]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'n':
				buf = append(buf, '\n')
			case 't':
				buf = append(buf, '\t')
			case 'r':
				buf = append(buf, '\r')
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			default:
				return d.unicodeString(start, out)
			}
		default:
			if buf != nil {
				buf = append(buf, c)
			}
		}
	}
	return false
}

// unicodeString decodes, with encoding/json, the string that starts at start, and holds a \u
// escape (or one encoding/json refuses).
func (d *canonicalDecoder) unicodeString(start int, out *string) bool {
	for d.pos++; d.pos < len(d.data); d.pos++ {
		switch d.data[d.pos] {
		case '\\':
			d.pos++
		case '"':
			d.pos++
			return json.Unmarshal([]byte(d.data[start-1:d.pos]), out) == nil
		}
	}
	return false
}

// int decodes an integer member as Encode writes it: no sign but '-', no leading zero, no
// fraction or exponent.
func (d *canonicalDecoder) int(k string, out *int64) bool {
	if !d.key(k) {
		return false
	}
	start := d.pos
	if d.peek('-') {
		d.pos++
	}
	digits := d.pos
	for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
		d.pos++
	}
	if d.pos == digits || d.data[digits] == '0' && d.pos-digits > 1 {
		return false
	}
	n, err := strconv.ParseInt(d.data[start:d.pos], 10, 64)
	*out = n
	return err == nil
}

// strings decodes a non-empty array of strings (Encode leaves an empty one out).
func (d *canonicalDecoder) strings(out *[]string) bool {
	if !d.byte('[') || d.peek(']') {
		return false
	}
	for {
		var s string
		if !d.stringValue(&s) {
			return false
		}
		*out = append(*out, s)
		if d.byte(']') {
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}

func (d *canonicalDecoder) rules(out *[]Rule) bool {
	if d.key("null") {
		return true
	}
	if !d.byte('[') {
		return false
	}
	*out = []Rule{}
	if d.byte(']') {
		return true
	}
	for {
		var r Rule
		if !d.rule(&r) {
			return false
		}
		*out = append(*out, r)
		if d.byte(']') {
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}

// rule decodes one rule: name, tools, when, action, reason, code, enforcement, prefilter, the
// optional ones only when present.
func (d *canonicalDecoder) rule(r *Rule) bool {
	if !d.byte('{') || !d.str(`"name":`, &r.Name) || !d.byte(',') {
		return false
	}
	if d.key(`"tools":`) && (!d.strings(&r.Tools) || !d.byte(',')) {
		return false
	}
	if !d.optStr(`"when":`, &r.When) || !d.str(`"action":`, (*string)(&r.Action)) {
		return false
	}
	for _, f := range []struct {
		key string
		out *string
	}{{`"reason":`, &r.Reason}, {`"code":`, &r.Code}, {`"enforcement":`, (*string)(&r.Enforcement)}} {
		if d.byte(',') {
			if !d.has(f.key) {
				d.pos-- // the comma belongs to a later member
				continue
			}
			if !d.str(f.key, f.out) {
				return false
			}
		}
	}
	if d.byte(',') {
		r.Prefilter = &Prefilter{}
		if !d.key(`"prefilter":`) || !d.prefilter(r.Prefilter, 0) {
			return false
		}
	}
	return d.byte('}')
}

// prefilter decodes a prefilter: op, args, var, field, value, values, the optional ones only
// when present.
func (d *canonicalDecoder) prefilter(p *Prefilter, depth int) bool {
	if depth > maxCanonicalDepth || !d.byte('{') || !d.str(`"op":`, &p.Op) {
		return false
	}
	if d.byte(',') {
		if !d.has(`"args":`) {
			d.pos--
		} else {
			if !d.key(`"args":`) || !d.byte('[') || d.peek(']') {
				return false
			}
			for {
				p.Args = append(p.Args, Prefilter{})
				if !d.prefilter(&p.Args[len(p.Args)-1], depth+1) {
					return false
				}
				if d.byte(']') {
					break
				}
				if !d.byte(',') {
					return false
				}
			}
		}
	}
	for _, f := range []struct {
		key string
		out *string
	}{{`"var":`, &p.Var}, {`"field":`, &p.Field}, {`"value":`, &p.Value}} {
		if d.byte(',') {
			if !d.has(f.key) {
				d.pos--
				continue
			}
			if !d.str(f.key, f.out) {
				return false
			}
		}
	}
	if d.byte(',') && (!d.key(`"values":`) || !d.strings(&p.Values)) {
		return false
	}
	return d.byte('}')
}

// onlySpace reports whether nothing but JSON whitespace is left.
func (d *canonicalDecoder) onlySpace() bool {
	for _, c := range d.data[d.pos:] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}
