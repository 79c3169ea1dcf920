package gate

import (
	"strings"
	"unicode"

	"github.com/intutic/gate-operator/internal/gate/toolname"
)

// What the prefilters know of the call's view (CallView) without building it: its kind, which of
// its lists are certainly empty, and whether its shell code is certainly known. Only a tool's
// shell command needs parsing to know more (its commands, and the files and URLs they name), so
// for every other tool these are exact, and a rule about a kind of call the tool does not make
// (a command for a Read, a host for a Write) is ruled out without CEL, and without parsing.
// viewOf (callview.go) builds the view itself; a test holds the two to each other.

// viewKind is call.kind of a (resolved) tool name.
func viewKind(tool string) string {
	switch shape := shapeOf(tool); {
	case shape != nil:
		return shape.Kind
	case toolname.HasMCPPrefix(tool):
		return KindMCP
	default:
		return KindUnknown
	}
}

// viewCommands is the view's list of commands, call.commands.
const viewCommands = "commands"

// viewListField reports whether field names a list of the view.
func viewListField(field string) bool {
	switch field {
	case "reads", "writes", "urls", "hosts", viewCommands:
		return true
	}
	return false
}

// viewListEmpty reports whether the list field of the call's view is certainly empty; false when
// it is not, or when only parsing the call's shell command would tell.
func viewListEmpty(tool string, input map[string]any, field string) bool {
	shape := shapeOf(tool)
	if shape == nil {
		return viewListField(field) // an unknown or MCP tool's lists are all empty
	}
	if shape.Shell != "" {
		if _, ok := stringField(input, shape.Shell); ok {
			return false // a command line: its commands, files and URLs are the parser's to say
		}
	}
	if shape.Patch != "" && field != viewCommands {
		if _, ok := stringField(input, shape.Patch); ok {
			return false // a patch: the files it names are the parser's to say
		}
	}
	var fields []string
	switch field {
	case viewCommands:
		return true
	case "reads":
		if shape.Dir != "" {
			return false // a search reads its directory, the working directory by default
		}
		if len(shape.ReadLists) > 0 {
			for _, f := range shape.ReadLists {
				if len(listField(input, f)) > 0 {
					return false
				}
			}
		}
		fields = shape.Reads
	case "writes":
		fields = shape.Writes
	case "urls", "hosts":
		if len(shape.TextURLs) > 0 {
			for _, f := range shape.TextURLs {
				if len(textURLs(input, f)) > 0 {
					return false
				}
			}
		}
		fields = shape.URLs // one host per URL
	default:
		return false
	}
	for _, f := range fields {
		if _, ok := stringField(input, f); ok {
			return false
		}
	}
	return true
}

// viewShellKnown is call.shellKnown, when it is known without parsing: false for code the gate
// does not parse, true for a call that runs no shell command; ok is false for a command line.
func viewShellKnown(tool string, input map[string]any) (known, ok bool) {
	shape := shapeOf(tool)
	if shape == nil {
		return true, true
	}
	if shape.Code != "" {
		if _, has := stringField(input, shape.Code); has {
			return false, true
		}
	}
	if shape.Shell != "" {
		if _, has := stringField(input, shape.Shell); has {
			return false, false
		}
	}
	if shape.Patch != "" {
		if _, has := stringField(input, shape.Patch); has {
			return false, false
		}
	}
	return true, true
}

// jsSpace is JavaScript's \s: Go's white space (unicode.IsSpace) and the byte order mark.
func jsSpace(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' }

// textURLs are the words of a text field that hold "://", as Gemini CLI's web_fetch finds the
// URLs in its prompt: the text split on white space, every word with "://" a URL (it refuses the
// call when one does not parse, or is not http or https).
func textURLs(input map[string]any, field string) []string {
	text, _ := stringField(input, field)
	var urls []string
	for _, w := range strings.FieldsFunc(text, jsSpace) {
		if strings.Contains(w, "://") {
			urls = append(urls, w)
		}
	}
	return urls
}

// stringField reads a non-empty string field of the input; "a.b" is field b of object field a,
// and "a|b" the first of a and b that is one.
func stringField(input map[string]any, field string) (string, bool) {
	for alt := range strings.SplitSeq(field, "|") {
		if s, ok := oneStringField(input, alt); ok {
			return s, true
		}
	}
	return "", false
}

// listField reads the non-empty strings of a list field of the input.
func listField(input map[string]any, field string) []string {
	items, _ := input[field].([]any)
	var out []string
	for _, it := range items {
		if s, ok := it.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

func oneStringField(input map[string]any, field string) (string, bool) {
	var cur any = input
	for rest, more := field, true; more; {
		var part string
		part, rest, more = strings.Cut(rest, ".")
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		cur = m[part]
	}
	s, ok := cur.(string)
	return s, ok && s != ""
}
