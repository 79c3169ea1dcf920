package gate

import (
	"path"
	"strings"
)

const mcpPrefix = "mcp__"

// CanonicalToolName joins an MCP server and tool as mcp__<server>__<tool>. A name that already
// carries the prefix, or a call without a server, is returned unchanged.
func CanonicalToolName(tool, server string) string {
	if server == "" || strings.HasPrefix(strings.ToLower(tool), mcpPrefix) {
		return tool
	}
	return mcpPrefix + server + "__" + tool
}

// MCPServer returns the server part of a canonical MCP tool name, or "" for other tools.
func MCPServer(canonical string) string {
	if len(canonical) < len(mcpPrefix) || !strings.EqualFold(canonical[:len(mcpPrefix)], mcpPrefix) {
		return ""
	}
	rest := canonical[len(mcpPrefix):]
	if i := strings.Index(rest, "__"); i > 0 {
		return rest[:i]
	}
	return ""
}

// normalizeToolName folds a tool name or pattern for matching: lower case, and outside mcp__
// names '_' and '-' are dropped, so web_fetch, WebFetch and webFetch are one tool.
func normalizeToolName(name string) string {
	lower := strings.ToLower(name)
	if strings.HasPrefix(lower, mcpPrefix) {
		return lower
	}
	if !strings.ContainsAny(lower, "_-") {
		return lower
	}
	var b strings.Builder
	b.Grow(len(lower))
	for i := 0; i < len(lower); i++ {
		if c := lower[i]; c != '_' && c != '-' {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// isGlob reports whether a normalized pattern has glob metacharacters.
func isGlob(pattern string) bool {
	return strings.ContainsAny(pattern, `*?[\`)
}

// validatePattern reports a malformed glob (path.Match syntax: *, ?, [...] and \ escapes;
// '*' does not cross '/').
func validatePattern(pattern string) error {
	_, err := path.Match(normalizeToolName(pattern), "")
	return err
}

// matchPattern matches a normalized pattern against a normalized tool name.
func matchPattern(pattern, name string) bool {
	if !isGlob(pattern) {
		return pattern == name
	}
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}
