package gate

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Tool names and tool patterns.
//
// A call's tool has one canonical name on every surface. MCP tools are mcp__<server>__<tool>:
// the server is the text between mcp__ and the next "__", the tool is the rest (it may hold
// "__" itself). ResolveTool says how a server reported beside the name is joined or refused.
//
// A rule's tool pattern matches a canonical name after both are folded: lower case, and for
// names and patterns that do not start with mcp__, '_' and '-' are dropped (outside [...]), so
// web_fetch, WebFetch and webFetch are one tool. A pattern is a glob:
//   - '*' matches any run of characters and '?' exactly one; no character is special to them,
//     so '/', '.' and '_' match like any other and "*" matches every tool;
//   - '[...]' matches one character of a set, '[^...]' one outside it; a set holds characters
//     and ranges such as a-z, and '-' and ']' in it are escaped;
//   - '\' makes the next character literal.
//
// A pattern that starts with mcp__ names a server and a tool, mcp__<server>__<tool>: its server
// part ends at its first "__" and matches the name's server, its tool part matches the name's
// tool. So '*' never crosses the separator between server and tool: mcp__github__* is every tool
// of github (mcp__github__x__y is its tool x__y) and none of github_evil; mcp__git*__* spans the
// servers whose names start with git; mcp__*__* is every MCP tool. A pattern such as mcp__git*
// or mcp__* names no tool and is refused when the rule is validated. A pattern that does not
// start with mcp__ matches the whole name, MCP names included.

const (
	mcpPrefix = "mcp__"
	mcpSep    = "__"
)

// hasMCPPrefix reports whether a name starts with mcp__, in any case.
func hasMCPPrefix(name string) bool {
	return len(name) >= len(mcpPrefix) && strings.EqualFold(name[:len(mcpPrefix)], mcpPrefix)
}

// splitMCP splits mcp__<server>__<tool> (a pattern too); ok is false for any other name, and
// when the server or the tool is empty.
func splitMCP(name string) (server, tool string, ok bool) {
	if !hasMCPPrefix(name) {
		return "", "", false
	}
	rest := name[len(mcpPrefix):]
	i := strings.Index(rest, mcpSep)
	if i <= 0 || i+len(mcpSep) == len(rest) {
		return "", "", false
	}
	return rest[:i], rest[i+len(mcpSep):], true
}

// ResolveTool returns the canonical name of a call's tool and its MCP server ("" for other
// tools), or why the call names no tool the rules can judge (the call is refused with
// input_invalid):
//   - a name mcp__<server>__<tool> carries its server; a server reported beside it must be the
//     same, case aside, or become the same by Claude Code's folding of server names into tool
//     names (every character outside [A-Za-z0-9_-] becomes '_': "claude.ai Gmail" is
//     claude_ai_Gmail); otherwise a server could pose as another. The name's server is used;
//   - a bare name with a server is joined as mcp__<server>__<tool>, and the join must split back
//     into the same server and tool, so a server such as "github__evil" or "github_" cannot
//     join into a name of github;
//   - a name that starts with mcp__ but names no server and tool is refused.
func ResolveTool(tool, server string) (name, mcpServer string, err error) {
	if hasMCPPrefix(tool) {
		s, _, ok := splitMCP(tool)
		if !ok {
			return "", "", fmt.Errorf("the tool name %q is not of the form mcp__<server>__<tool>", tool)
		}
		if server != "" && !strings.EqualFold(server, s) && !strings.EqualFold(foldServerName(server), s) {
			return "", "", fmt.Errorf("the tool %q belongs to MCP server %q, but the call reports server %q", tool, s, server)
		}
		return tool, s, nil
	}
	if server == "" {
		return tool, "", nil
	}
	name = mcpPrefix + server + mcpSep + tool
	if s, t, ok := splitMCP(name); !ok || s != server || t != tool {
		return "", "", fmt.Errorf("MCP server %q and tool %q do not join into one mcp__<server>__<tool> name", server, tool)
	}
	return name, server, nil
}

// foldServerName is how Claude Code puts a server name into its tool names.
func foldServerName(server string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, server)
}

// CanonicalToolName is the name ResolveTool gives a call's tool, or the tool as reported when
// the call names no tool the rules can judge. For logs and indexes; deciding uses ResolveTool.
func CanonicalToolName(tool, server string) string {
	name, _, err := ResolveTool(tool, server)
	if err != nil {
		return tool
	}
	return name
}

// MCPServer returns the server part of a canonical MCP tool name, or "" for other tools.
func MCPServer(canonical string) string {
	s, _, _ := splitMCP(canonical)
	return s
}

// normalizeToolName folds a tool name for matching: lower case, and outside mcp__ names '_'
// and '-' are dropped, so web_fetch, WebFetch and webFetch are one tool.
func normalizeToolName(name string) string {
	lower := strings.ToLower(name)
	if strings.HasPrefix(lower, mcpPrefix) || !strings.ContainsAny(lower, "_-") {
		return lower
	}
	return strings.NewReplacer("_", "", "-", "").Replace(lower)
}

// normalizePattern folds a tool pattern as normalizeToolName folds names, leaving the glob
// syntax intact: inside [...] nothing is dropped, and an escaped '_' or '-' goes with its '\'.
func normalizePattern(pattern string) string {
	lower := strings.ToLower(pattern)
	if strings.HasPrefix(lower, mcpPrefix) || !strings.ContainsAny(lower, "_-") {
		return lower
	}
	var b strings.Builder
	b.Grow(len(lower))
	inSet := false
	for i := 0; i < len(lower); i++ {
		c := lower[i]
		switch {
		case c == '\\' && i+1 < len(lower):
			i++
			if n := lower[i]; inSet || (n != '_' && n != '-') {
				b.WriteByte(c)
				b.WriteByte(n)
			}
			continue
		case inSet:
			inSet = c != ']'
		case c == '[':
			inSet = true
		case c == '_' || c == '-':
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// isGlob reports whether a normalized pattern has glob metacharacters.
func isGlob(pattern string) bool {
	return strings.ContainsAny(pattern, `*?[\`)
}

var errMCPPattern = errors.New(`an MCP tool pattern is mcp__<server>__<tool>, and '*' does not span the "__" between them: write mcp__<server>__* for every tool of a server, mcp__*__* for every MCP tool`)

// validatePattern reports a malformed tool pattern.
func validatePattern(pattern string) error {
	p := normalizePattern(pattern)
	if !strings.HasPrefix(p, mcpPrefix) {
		return checkGlob(p)
	}
	server, tool, ok := splitMCP(p)
	if !ok {
		return errMCPPattern
	}
	if err := checkGlob(server); err != nil {
		return err
	}
	return checkGlob(tool)
}

// matchPattern matches a normalized, valid pattern against a normalized tool name.
func matchPattern(pattern, name string) bool {
	if !strings.HasPrefix(pattern, mcpPrefix) {
		if !isGlob(pattern) {
			return pattern == name
		}
		return globMatch(pattern, name)
	}
	ps, pt, ok := splitMCP(pattern)
	if !ok {
		return false
	}
	ns, nt, ok := splitMCP(name)
	return ok && globMatch(ps, ns) && globMatch(pt, nt)
}

var errBadGlob = errors.New("syntax error in pattern")

// checkGlob reports a glob that does not parse: a trailing '\', or a set that is empty,
// unclosed, or has a bad range.
func checkGlob(p string) error {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			if i+1 == len(p) {
				return errBadGlob
			}
			i++
		case '[':
			n, ok := setWidth(p[i:])
			if !ok {
				return errBadGlob
			}
			i += n - 1
		}
	}
	return nil
}

// setWidth is the length of the set at the start of p, and whether it is well formed.
func setWidth(p string) (int, bool) {
	_, n, ok := matchSet(p, utf8.RuneError)
	return n, ok
}

// matchSet matches r against the set at the start of p ('[' ... ']'); n is the set's length.
func matchSet(p string, r rune) (matched bool, n int, ok bool) {
	i := 1
	negate := i < len(p) && p[i] == '^'
	if negate {
		i++
	}
	ranges := 0
	for {
		if i >= len(p) {
			return false, 0, false
		}
		if p[i] == ']' && ranges > 0 {
			return matched != negate, i + 1, true
		}
		lo, w, ok := setChar(p[i:])
		if !ok {
			return false, 0, false
		}
		i += w
		hi := lo
		if i < len(p) && p[i] == '-' {
			if hi, w, ok = setChar(p[i+1:]); !ok || hi < lo {
				return false, 0, false
			}
			i += 1 + w
		}
		if lo <= r && r <= hi {
			matched = true
		}
		ranges++
	}
}

// setChar reads one character of a set: '-' and ']' must be escaped.
func setChar(p string) (r rune, n int, ok bool) {
	if p == "" || p[0] == '-' || p[0] == ']' {
		return 0, 0, false
	}
	if p[0] == '\\' {
		if len(p) < 2 {
			return 0, 0, false
		}
		r, w := utf8.DecodeRuneInString(p[1:])
		return r, 1 + w, true
	}
	r, w := utf8.DecodeRuneInString(p)
	return r, w, true
}

// globMatch matches a valid glob against s. On a mismatch it backtracks to the last '*' and
// lets it take one more character, so it runs in O(len(p)*len(s)) at worst.
func globMatch(p, s string) bool {
	px, sx := 0, 0
	starPx, starSx := -1, 0
	for px < len(p) || sx < len(s) {
		if px < len(p) {
			switch p[px] {
			case '*':
				starPx, starSx = px, sx
				px++
				continue
			case '?':
				if sx < len(s) {
					_, w := utf8.DecodeRuneInString(s[sx:])
					px, sx = px+1, sx+w
					continue
				}
			case '[':
				if sx < len(s) {
					r, w := utf8.DecodeRuneInString(s[sx:])
					if matched, n, ok := matchSet(p[px:], r); ok && matched {
						px, sx = px+n, sx+w
						continue
					}
				}
			default:
				lit := p[px:]
				if lit[0] == '\\' {
					lit = lit[1:] // in a valid glob an escape is followed by a character
				}
				want, lw := utf8.DecodeRuneInString(lit)
				if sx < len(s) {
					r, w := utf8.DecodeRuneInString(s[sx:])
					if r == want {
						px, sx = px+len(p[px:])-len(lit)+lw, sx+w
						continue
					}
				}
			}
		}
		if starPx >= 0 && starSx < len(s) {
			_, w := utf8.DecodeRuneInString(s[starSx:])
			starSx += w
			px, sx = starPx+1, starSx
			continue
		}
		return false
	}
	return true
}
