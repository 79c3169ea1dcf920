package shellparse

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// Shell words as the shell would pass them to a command, when that is decidable statically:
// quotes and escapes resolved, brace expansions expanded; see Parse.

// word returns the fields a word expands to and whether they are static. A word that is not
// static is one field, as written. A static word with glob characters is its pattern; glob
// reports it (a command name that is a pattern is not static).
func (w *shellWalker) word(wd *syntax.Word) (fields []string, static bool) {
	fields, static, _ = w.wordGlob(wd)
	return fields, static
}

func (w *shellWalker) wordGlob(wd *syntax.Word) (fields []string, static, glob bool) {
	return w.appendWord(nil, wd)
}

// appendWord is wordGlob appending the fields to dst.
func (w *shellWalker) appendWord(dst []string, wd *syntax.Word) (fields []string, static, glob bool) {
	if s, ok := plainLiteral(wd); ok {
		return append(dst, s), true, false
	}
	fields, static, glob = w.expandWord(wd)
	return append(dst, fields...), static, glob
}

// expandWord is wordGlob of a word that is not a plain literal.
func (w *shellWalker) expandWord(wd *syntax.Word) (fields []string, static, glob bool) {
	alternatives := [][]syntax.WordPart{wd.Parts}
	split := *wd // SplitBraces replaces the parts of the word it is given; the tree stays as parsed
	if syntax.SplitBraces(&split) {
		var ok bool
		if alternatives, ok = expandBraces(split.Parts); !ok {
			return []string{w.text(wd)}, false, false
		}
	}
	fields = make([]string, 0, len(alternatives))
	for _, parts := range alternatives {
		s, ok, g := literal(parts)
		if !ok {
			return []string{w.text(wd)}, false, false
		}
		fields = append(fields, s)
		glob = glob || g
	}
	return fields, true, glob
}

// plainLiteral is the value of a word that is one unquoted literal with no escape, brace or
// glob character: the most common word, which is itself (what wordGlob would find, sooner).
func plainLiteral(wd *syntax.Word) (string, bool) {
	if len(wd.Parts) != 1 {
		return "", false
	}
	lit, ok := wd.Parts[0].(*syntax.Lit)
	if !ok {
		return "", false
	}
	for i := 0; i < len(lit.Value); i++ {
		switch lit.Value[i] {
		case '\\', '{', '*', '?', '[':
			return "", false
		}
	}
	return lit.Value, true
}

// static reports whether a word is static.
func (w *shellWalker) static(wd *syntax.Word) bool {
	_, ok := w.word(wd)
	return ok
}

// literal is the value of word parts with no expansion in them. glob reports unquoted glob
// characters; a glob segment that starts with "." could match "." or "..", so it is not static.
func literal(parts []syntax.WordPart) (s string, static, glob bool) {
	var b strings.Builder
	var active []int // offsets in b of unquoted *, ? and [
	for _, part := range parts {
		switch p := part.(type) {
		case *syntax.Lit:
			active = unquoted(&b, p.Value, active)
		case *syntax.SglQuoted:
			if p.Dollar {
				b.WriteString(ansiC(p.Value))
			} else {
				b.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false, false
				}
				b.WriteString(doubleQuoted(lit.Value))
			}
		default: // parameter, command, arithmetic and process substitutions; extended globs
			return "", false, false
		}
	}
	s = b.String()
	if !isGlob(s, active) {
		return s, true, false
	}
	start, k := 0, 0 // the segment of s being read, and the next active character
	for i := 0; i <= len(s) && k < len(active); i++ {
		if i < len(s) && s[i] != '/' {
			continue
		}
		// s[start:i] is a segment: a glob in it may match "." or ".." when it starts with ".".
		glob := false
		for ; k < len(active) && active[k] < i; k++ {
			glob = true
		}
		if glob && s[start] == '.' {
			return "", false, false
		}
		start = i + 1
	}
	return s, true, true
}

// unquoted writes an unquoted literal, resolving backslash escapes, and returns active with the
// offsets of its glob characters added.
func unquoted(b *strings.Builder, v string, active []int) []int {
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\' && i+1 < len(v):
			i++
			b.WriteByte(v[i])
			continue
		case c == '*' || c == '?' || c == '[':
			active = append(active, b.Len())
		}
		b.WriteByte(c)
	}
	return active
}

// isGlob reports whether the active characters make s a pattern: a * or ?, or a [ closed by a
// later ].
func isGlob(s string, active []int) bool {
	lastClose := strings.LastIndexByte(s, ']')
	for _, i := range active {
		if s[i] != '[' || i < lastClose {
			return true
		}
	}
	return false
}

// doubleQuoted resolves the escapes of a literal inside double quotes: \ escapes only $, `, ",
// \ and a newline (a line continuation).
func doubleQuoted(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			switch v[i+1] {
			case '$', '`', '"', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

var ansiEscapes = map[byte]string{
	'a': "\a", 'b': "\b", 'e': "\x1b", 'E': "\x1b", 'f': "\f", 'n': "\n", 'r': "\r", 't': "\t",
	'v': "\v", '\\': `\`, '\'': "'", '"': `"`, '?': "?",
}

// ansiC resolves the escapes of $'...' as Bash does.
func ansiC(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' || i+1 == len(v) {
			b.WriteByte(v[i])
			continue
		}
		i++
		c := v[i]
		if e, ok := ansiEscapes[c]; ok {
			b.WriteString(e)
			continue
		}
		switch c {
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			n, digits := leadingDigits(v[i+1:], 16, width)
			if digits == 0 {
				b.WriteByte('\\')
				b.WriteByte(c)
				continue
			}
			i += digits
			if c == 'x' {
				b.WriteByte(byte(n))
			} else if n <= utf8.MaxRune {
				b.WriteRune(rune(n))
			}
		case 'c':
			if i+1 < len(v) {
				i++
				b.WriteByte(v[i] & 0x1f)
			}
		default:
			if n, digits := leadingDigits(v[i:], 8, 3); digits > 0 {
				i += digits - 1
				b.WriteByte(byte(n))
				continue
			}
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return b.String()
}

// leadingDigits reads at most width digits of base from the start of s.
func leadingDigits(s string, base, width int) (n uint64, digits int) {
	for digits < width && digits < len(s) {
		d, err := strconv.ParseUint(s[digits:digits+1], base, 8)
		if err != nil {
			break
		}
		n = n*uint64(base) + d
		digits++
	}
	return n, digits
}

// expandBraces expands the brace expressions of word parts into the alternatives they stand for,
// in order; ok is false past maxBraceFields.
func expandBraces(parts []syntax.WordPart) (alternatives [][]syntax.WordPart, ok bool) {
	alternatives = [][]syntax.WordPart{nil}
	for _, part := range parts {
		be, isBrace := part.(*syntax.BraceExp)
		if !isBrace {
			for i := range alternatives {
				alternatives[i] = append(alternatives[i], part)
			}
			continue
		}
		var elems [][]syntax.WordPart
		if be.Sequence {
			if elems, ok = braceSequence(be); !ok {
				return nil, false
			}
		} else {
			for _, e := range be.Elems {
				sub, ok := expandBraces(e.Parts)
				if !ok {
					return nil, false
				}
				elems = append(elems, sub...)
			}
		}
		if len(alternatives)*len(elems) > maxBraceFields {
			return nil, false
		}
		next := make([][]syntax.WordPart, 0, len(alternatives)*len(elems))
		for _, a := range alternatives {
			for _, e := range elems {
				next = append(next, append(append([]syntax.WordPart{}, a...), e...))
			}
		}
		alternatives = next
	}
	return alternatives, true
}

// braceSequence expands {x..y[..step]} over integers or single characters.
func braceSequence(be *syntax.BraceExp) ([][]syntax.WordPart, bool) {
	var bounds []string
	for _, e := range be.Elems {
		bounds = append(bounds, e.Lit())
	}
	if len(bounds) < 2 {
		return nil, false
	}
	step := int64(1)
	if len(bounds) == 3 {
		s, err := strconv.ParseInt(bounds[2], 10, 64)
		if err != nil {
			return nil, false
		}
		if step = max(s, -s); step == 0 {
			step = 1
		}
	}
	from, errFrom := strconv.ParseInt(bounds[0], 10, 64)
	to, errTo := strconv.ParseInt(bounds[1], 10, 64)
	chars := errFrom != nil || errTo != nil
	if chars {
		if len(bounds[0]) != 1 || len(bounds[1]) != 1 {
			return nil, false
		}
		from, to = int64(bounds[0][0]), int64(bounds[1][0])
	}
	n := (max(from, to)-min(from, to))/step + 1 // negative when the span overflows
	if n > maxBraceFields || n <= 0 {
		return nil, false
	}
	if from > to {
		step = -step
	}
	out := make([][]syntax.WordPart, 0, n)
	for k, i := int64(0), from; k < n; k, i = k+1, i+step {
		v := strconv.FormatInt(i, 10)
		if chars {
			v = string(rune(i))
		}
		out = append(out, []syntax.WordPart{&syntax.SglQuoted{Value: v}})
	}
	return out, true
}
