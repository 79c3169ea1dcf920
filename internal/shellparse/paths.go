package shellparse

import (
	"path"
	"strings"
)

// Paths, as the rules see them: lexical, slash-separated, never read from a file system (the
// gate does not run where the agent's files are), so symbolic links are not followed.
//
//   - An absolute path is cleaned: "." and empty segments go, ".." removes the segment before it
//     and stops at the root ("/workspace/../etc" is "/etc", "//etc/" is "/etc").
//   - A path whose first segment starts with "~" ("~", "~/x", "~root/x") is under a home
//     directory the gate does not know. The segment is kept as a root of its own and the rest is
//     cleaned as a relative path, so ".." can climb above it: "~/a/../../etc" is "~/../etc".
//   - Any other path is relative: cleaned, with leading ".." kept ("a/../../b" is "../b"), and
//     "" is ".".

// Clean cleans p lexically (see above).
func Clean(p string) string {
	if strings.HasPrefix(p, "~") {
		home, rest, _ := strings.Cut(p, "/")
		if rest = path.Clean(strings.TrimLeft(rest, "/")); rest == "." {
			return home
		}
		return home + "/" + rest
	}
	return path.Clean(p)
}

// Resolve is p as seen from the directory base: p itself (cleaned) when it is absolute or
// under "~", or when base is empty (not known); base joined with p otherwise.
func Resolve(base, p string) string {
	if base == "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") {
		return Clean(p)
	}
	return Clean(base + "/" + p)
}

// IsUnder reports whether p is dir or inside it, lexically: both are cleaned first, so ".."
// cannot climb out ("/workspace/../etc" is not under "/workspace") and a sibling that only shares
// a prefix is not inside ("/workspace-evil" is not under "/workspace"). Paths relative to
// different roots (absolute, a "~" home, the working directory) are never inside one another;
// "/" holds every absolute path, "." every relative path that does not climb out with "..", and
// "~" every path under that home that does not climb out of it.
func IsUnder(p, dir string) bool {
	rootP, restP := splitRoot(Clean(p))
	rootD, restD := splitRoot(Clean(dir))
	if rootP != rootD {
		return false
	}
	switch {
	case rootP == "/" && restD == "/":
		return true
	case rootP != "/" && restD == ".":
		return restP != ".." && !strings.HasPrefix(restP, "../")
	}
	return restP == restD || (strings.HasPrefix(restP, restD) && restP[len(restD)] == '/')
}

// splitRoot splits a cleaned path into what it is relative to and the rest: "/" and the path
// itself when it is absolute, its "~" segment and the (relative) rest when it is under a home
// directory, "" and the path when it is relative to the working directory.
func splitRoot(p string) (root, rest string) {
	switch {
	case strings.HasPrefix(p, "/"):
		return "/", p
	case strings.HasPrefix(p, "~"):
		home, rest, found := strings.Cut(p, "/")
		if !found {
			rest = "."
		}
		return home, rest
	}
	return "", p
}

// Base is the last element of p after cleaning ("/" for the root, "." for "").
func Base(p string) string { return path.Base(Clean(p)) }

// Dir is every element of p but the last, after cleaning.
func Dir(p string) string {
	c := Clean(p)
	if strings.HasPrefix(c, "~") && !strings.Contains(c, "/") {
		return c // a home directory is a root of its own
	}
	return path.Dir(c)
}
