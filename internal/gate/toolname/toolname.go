// Package toolname is the gate's tool names and tool patterns.
//
// A call's tool has one canonical name on every surface. MCP tools are mcp__<server>__<tool>:
// the server is the text between mcp__ and the next "__", the tool is the rest (it may hold
// "__" itself). Resolve says how a server reported beside the name is joined or refused.
//
// A rule's tool pattern matches a canonical name after both are folded: lower case, and for
// names and patterns that do not start with mcp__, '_' and '-' are dropped (outside [...]), so
// web_fetch, WebFetch and webFetch are one tool. A pattern is a glob (github.com/gobwas/glob,
// with no separators):
//   - '*' (or '**') matches any run of characters and '?' exactly one; no character is special
//     to them, so '/', '.' and '_' match like any other and "*" matches every tool;
//   - '[...]' matches one character of a set, '[!...]' one outside it; a set is either one
//     range, [a-z], or a list of characters, [abc], in which ']' is escaped and '-' goes first,
//     [-.]. A set holds no more: [a-z0-9] is refused (write {[a-z],[0-9]}), and so are [^...]
//     and [\-...], which the library would read as a set holding '^' and a range from '\';
//   - '{a,b}' matches any of its comma-separated alternatives, each a glob;
//   - '\' makes the next character literal.
//
// A pattern that starts with mcp__ names a server and a tool, mcp__<server>__<tool>: its server
// part ends at its first "__" and matches the name's server, its tool part matches the name's
// tool. So '*' never crosses the separator between server and tool: mcp__github__* is every tool
// of github (mcp__github__x__y is its tool x__y) and none of github_evil; mcp__git*__* spans the
// servers whose names start with git; mcp__*__* is every MCP tool. A pattern such as mcp__git*
// or mcp__* names no tool and is refused when the rule is validated. A pattern that does not
// start with mcp__ matches the whole name, MCP names included.
package toolname

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gobwas/glob"
	"github.com/gobwas/glob/syntax"
)

const (
	mcpPrefix = "mcp__"
	mcpSep    = "__"
)

// HasMCPPrefix reports whether a name starts with mcp__, in any case.
func HasMCPPrefix(name string) bool {
	return len(name) >= len(mcpPrefix) && strings.EqualFold(name[:len(mcpPrefix)], mcpPrefix)
}

// splitMCP splits mcp__<server>__<tool> (a pattern too); ok is false for any other name, and
// when the server or the tool is empty.
func splitMCP(name string) (server, tool string, ok bool) {
	if !HasMCPPrefix(name) {
		return "", "", false
	}
	rest := name[len(mcpPrefix):]
	i := strings.Index(rest, mcpSep)
	if i <= 0 || i+len(mcpSep) == len(rest) {
		return "", "", false
	}
	return rest[:i], rest[i+len(mcpSep):], true
}

// Tool is a call's tool, resolved once per decision and passed down: its canonical name, its
// MCP server ("" for other tools), and the name folded for matching.
type Tool struct {
	Name, Server string
	// Key is Name folded (Normalize): the form tool patterns and the tool index match.
	Key string
}

// Resolve returns a call's tool by its canonical name and its MCP server, or why the call names
// no tool the rules can judge (the call is refused with input_invalid):
//   - a name mcp__<server>__<tool> carries its server; a server reported beside it must be the
//     same, case aside, or become the same by Claude Code's folding of server names into tool
//     names (every character outside [A-Za-z0-9_-] becomes '_': "claude.ai Gmail" is
//     claude_ai_Gmail); otherwise a server could pose as another. The name's server is used;
//   - a bare name with a server is joined as mcp__<server>__<tool>, and the join must split back
//     into the same server and tool, so a server such as "github__evil" or "github_" cannot
//     join into a name of github;
//   - a name that starts with mcp__ but names no server and tool is refused.
func Resolve(tool, server string) (Tool, error) {
	name, mcpServer, err := resolve(tool, server)
	if err != nil {
		return Tool{}, err
	}
	return Tool{Name: name, Server: mcpServer, Key: Normalize(name)}, nil
}

func resolve(tool, server string) (name, mcpServer string, err error) {
	if HasMCPPrefix(tool) {
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

// Canonical is the name Resolve gives a call's tool, or the tool as reported when the call
// names no tool the rules can judge. For logs and indexes; deciding uses Resolve.
func Canonical(tool, server string) string {
	name, _, err := resolve(tool, server)
	if err != nil {
		return tool
	}
	return name
}

// Normalize folds a tool name for matching: lower case, and outside mcp__ names '_'
// and '-' are dropped, so web_fetch, WebFetch and webFetch are one tool.
func Normalize(name string) string {
	lower := strings.ToLower(name)
	if strings.HasPrefix(lower, mcpPrefix) || !strings.ContainsAny(lower, "_-") {
		return lower
	}
	return strings.NewReplacer("_", "", "-", "").Replace(lower)
}

// Fold folds a normalized name as names outside mcp__ are folded, MCP names too: the form a
// pattern that does not start with mcp__ is matched against.
func Fold(name string) string {
	if !strings.ContainsAny(name, "_-") {
		return name
	}
	return strings.NewReplacer("_", "", "-", "").Replace(name)
}

// normalizePattern folds a tool pattern as Normalize folds names, leaving the glob
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

var (
	errMCPPattern = errors.New(`an MCP tool pattern is mcp__<server>__<tool>, and '*' does not span the "__" between them: write mcp__<server>__* for every tool of a server, mcp__*__* for every MCP tool`)
	// Sets the library reads otherwise than their author may mean: [^a] holds '^' and 'a', and
	// [\-a] is the range from '\' to 'a'.
	misreadSets = []struct {
		text string
		err  error
	}{
		{"[^", errors.New("[^...] is not a negated set: write [!...]")},
		{`[\-`, errors.New(`a set cannot start with \-: write '-' first, [-...]`)},
		{`[!\-`, errors.New(`a set cannot start with \-: write '-' first, [!-...]`)},
	}
)

// Pattern is a tool pattern normalized and compiled once, for matching many names.
type Pattern struct {
	text    string // normalized
	literal bool   // no glob syntax: matches only the name equal to text
	mcp     bool
	// whole matches a pattern that does not start with mcp__; server and tool match the parts
	// of one that does.
	whole, server, tool textGlob
}

// Compile normalizes and compiles a tool pattern, or says why it is malformed.
func Compile(pattern string) (Pattern, error) {
	p := Pattern{text: normalizePattern(pattern)}
	p.literal = isLiteral(p.text)
	p.mcp = strings.HasPrefix(p.text, mcpPrefix)
	for _, m := range misreadSets {
		if strings.Contains(p.text, m.text) {
			return Pattern{}, m.err
		}
	}
	var err error
	if !p.mcp {
		if p.whole, err = compileGlob(p.text); err != nil {
			return Pattern{}, err
		}
		return p, nil
	}
	server, tool, ok := splitMCP(p.text)
	if !ok {
		return Pattern{}, errMCPPattern
	}
	if p.server, err = compileGlob(server); err != nil {
		return Pattern{}, fmt.Errorf("server part: %w", err)
	}
	if p.tool, err = compileGlob(tool); err != nil {
		return Pattern{}, fmt.Errorf("tool part: %w", err)
	}
	return p, nil
}

// Literal returns the normalized text of a pattern without glob syntax, which matches only
// the name equal to it; ok is false for a glob.
func (p *Pattern) Literal() (text string, ok bool) { return p.text, p.literal }

// Match reports whether the pattern matches a normalized tool name (a Tool's Key). A pattern
// that does not start with mcp__ matches the whole name with '_' and '-' dropped on both sides,
// MCP names included: *delete_repo matches mcp__github__delete_repo.
func (p *Pattern) Match(name string) bool {
	if !p.mcp {
		return p.whole.match(Fold(name))
	}
	s, t, ok := splitMCP(name)
	return ok && p.server.match(s) && p.tool.match(t)
}

// textGlob is a glob, or a text without glob syntax, which is compared and not compiled.
type textGlob struct {
	text string
	g    *glob.Pattern // nil for a text
}

// compileGlob compiles with no separators, so '*' and '?' match any character. An error
// carries the library's reason without its offset, which counts in the normalized text.
func compileGlob(p string) (textGlob, error) {
	if isLiteral(p) {
		return textGlob{text: p}, nil
	}
	g, err := glob.Compile(p)
	if err != nil {
		if se := (*glob.SyntaxError)(nil); errors.As(err, &se) {
			return textGlob{}, errors.New(se.Reason)
		}
		return textGlob{}, err
	}
	return textGlob{text: p, g: g}, nil
}

func (t textGlob) match(s string) bool {
	if t.g == nil {
		return t.text == s
	}
	return t.g.Match(s)
}

// isLiteral reports whether a pattern has none of the glob meta characters.
func isLiteral(p string) bool {
	for i := range len(p) {
		if syntax.IsSpecial(p[i]) {
			return false
		}
	}
	return true
}
