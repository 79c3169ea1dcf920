package anthropic

import (
	"fmt"
	"net/url"
	"strings"
)

// query is an ordered query string; arrays are written key[]=v, one pair per element, and
// everything but A-Z a-z 0-9 - . _ ~ is percent-encoded with uppercase hex (specs §1.5).
type query []queryPair

type queryPair struct{ key, value string }

func (q query) add(key, value string) query { return append(q, queryPair{key, value}) }

func (q query) addAll(key string, values []string) query {
	for _, v := range values {
		q = append(q, queryPair{key + "[]", v})
	}
	return q
}

// with returns q with key set to value: replaced in place when present, else appended.
func (q query) with(key, value string) query {
	out := append(query{}, q...)
	for i := range out {
		if out[i].key == key {
			out[i].value = value
			return out
		}
	}
	return append(out, queryPair{key, value})
}

func (q query) encode() string {
	var b strings.Builder
	for i, p := range q {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(rfc3986(p.key))
		b.WriteByte('=')
		b.WriteString(rfc3986(p.value))
	}
	return b.String()
}

func rfc3986(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// sessionSegment encodes a session id as a path parameter.
func sessionSegment(sessionID string) (string, error) { return pathSegment("session_id", sessionID) }

// pathSegment encodes a path parameter; empty, "." and ".." are refused (specs §1.1).
func pathSegment(name, value string) (string, error) {
	if value == "" || value == "." || value == ".." {
		return "", fmt.Errorf("%s %q is not a valid path parameter", name, value)
	}
	return url.PathEscape(value), nil
}
