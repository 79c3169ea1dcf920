//go:build !nocel

package gate

import (
	"net/url"
	"strings"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/intutic/gate-operator/internal/shellparse"

	"github.com/intutic/gate-operator/internal/gate/toolname"
)

// CallView is the typed view of a call the rules see as `call`, built from the tool name, the
// input and the working directory by the table in toolshapes.go, the same on every surface.
// Paths are cleaned and resolved against Cwd when it is known (see internal/shellparse/paths.go); with no Cwd a
// relative path stays relative, so it is under no absolute directory.
type CallView struct {
	// Kind is read, write, exec, fetch, mcp, other (a known tool that touches none of these),
	// or unknown (a tool the table does not know).
	Kind string `json:"kind" cel:"kind"`
	// Cwd is the call's working directory as the runtime reports it (the hook's cwd), or "".
	Cwd string `json:"cwd" cel:"cwd"`
	// Reads and Writes are the files the call reads and writes: the tool's path fields, the
	// directory a search reads, and the files a shell command's redirections open.
	Reads  []string `json:"reads" cel:"reads"`
	Writes []string `json:"writes" cel:"writes"`
	// URLs are the URLs the call fetches: the tool's URL fields and the static arguments of a
	// shell command that are absolute URLs (scheme://host...). Hosts[i] is the host of URLs[i]:
	// lower case, without port, brackets or a trailing dot, and "" when it has none.
	URLs  []string `json:"urls" cel:"urls"`
	Hosts []string `json:"hosts" cel:"hosts"`
	// Commands are the commands a shell command line runs (see internal/shellparse).
	Commands []shellparse.Command `json:"commands" cel:"commands"`
	// ShellKnown is false when the call runs code the gate cannot read in full: a command line
	// that does not parse or is over the bounds, a command name, eval'd or sh -c code, or a
	// redirection target that is not static, or code in another language (PowerShell).
	ShellKnown bool `json:"shellKnown" cel:"shellKnown"`
}

// ViewOf is the view the rules see of a call. It never fails: a tool name that does not resolve
// is an unknown tool.
func ViewOf(c *Call) CallView {
	t, _ := toolname.Resolve(c.Tool, c.Server) // a zero Tool when it does not
	return viewOf(t.Name, c.Input, c.Cwd)
}

func viewOf(tool string, input map[string]any, cwd string) CallView {
	v := CallView{
		Kind: KindUnknown, Cwd: cwd, ShellKnown: true,
		Reads: []string{}, Writes: []string{}, URLs: []string{}, Hosts: []string{}, Commands: []shellparse.Command{},
	}
	shape := shapeOf(tool)
	switch {
	case shape != nil:
		v.Kind = shape.Kind
	case toolname.HasMCPPrefix(tool):
		v.Kind = KindMCP
		return v
	default:
		return v
	}
	v.addPaths(shape, input, cwd)
	for _, f := range shape.URLs {
		if u, ok := stringField(input, f); ok {
			v.URLs = append(v.URLs, u)
		}
	}
	for _, f := range shape.TextURLs {
		v.URLs = append(v.URLs, textURLs(input, f)...)
	}
	if patch, ok := stringField(input, shape.Patch); ok && shape.Patch != "" {
		v.addPatch(patch, cwd)
	}
	if _, ok := stringField(input, shape.Code); ok && shape.Code != "" {
		v.ShellKnown = false
	}
	if cmd, ok := stringField(input, shape.Shell); ok && shape.Shell != "" {
		v.addShell(shape, input, cmd, cwd)
	}
	for _, u := range v.URLs {
		v.Hosts = append(v.Hosts, hostOf(u))
	}
	return v
}

// addPaths adds the paths the shape's fields name: the files read and written, the lists of
// files read, and the directory a search reads.
func (v *CallView) addPaths(shape *ToolShape, input map[string]any, cwd string) {
	for _, f := range shape.Reads {
		if p, ok := stringField(input, f); ok {
			v.Reads = append(v.Reads, shellparse.Resolve(cwd, p))
		}
	}
	for _, f := range shape.Writes {
		if p, ok := stringField(input, f); ok {
			v.Writes = append(v.Writes, shellparse.Resolve(cwd, p))
		}
	}
	for _, f := range shape.ReadLists {
		for _, p := range listField(input, f) {
			v.Reads = append(v.Reads, shellparse.Resolve(cwd, p))
		}
	}
	if shape.Dir != "" {
		v.Reads = append(v.Reads, searchRoot(input, shape, cwd))
	}
}

// addPatch adds the files of a patch in the apply_patch format; a text that is not one is code
// the gate cannot read.
func (v *CallView) addPatch(patch, cwd string) {
	files, known := patchFiles(patch, cwd)
	v.Reads = append(v.Reads, files.reads...)
	v.Writes = append(v.Writes, files.writes...)
	v.ShellKnown = v.ShellKnown && known
}

// addShell adds what a shell command line runs, reads, writes and fetches, run in the shape's
// directory field or the working directory; and the files of a patch Codex applies from it.
func (v *CallView) addShell(shape *ToolShape, input map[string]any, cmd, cwd string) {
	dir := cwd
	if d, ok := stringField(input, shape.ShellDir); ok && shape.ShellDir != "" {
		dir = shellparse.Resolve(cwd, d)
	}
	sh := shellparse.Parse(cmd, dir)
	v.Commands, v.ShellKnown = sh.Commands, sh.Known
	if v.Commands == nil {
		v.Commands = []shellparse.Command{}
	}
	v.Reads = append(v.Reads, sh.Reads...)
	v.Writes = append(v.Writes, sh.Writes...)
	v.URLs = append(v.URLs, sh.URLs...)
	// Codex applies such a patch in the directory the command runs in (after a cd, say); where
	// the line does not say which, its relative paths stay relative, under no directory.
	for _, c := range v.Commands {
		if isPatchCommand(c) {
			v.addPatch(cmd, c.Cwd)
		}
	}
}

// searchRoot is the directory a search (Glob, Grep) reads: its directory field, or the working
// directory, and below it the literal leading directories of its glob. A glob that can climb
// with ".." ({a,..}/x) climbs at most once per "..", so the root climbs that much.
func searchRoot(input map[string]any, shape *ToolShape, cwd string) string {
	dir, _ := stringField(input, shape.Dir)
	root := shellparse.Resolve(cwd, dir)
	pattern, ok := stringField(input, shape.Pattern)
	if shape.Pattern == "" || !ok {
		return root
	}
	segs := strings.Split(pattern, "/")
	lit := 0
	for lit < len(segs)-1 && !strings.ContainsAny(segs[lit], "*?[{\\") {
		lit++
	}
	prefix := strings.Join(segs[:lit], "/")
	if strings.HasPrefix(pattern, "/") && prefix == "" {
		prefix = "/"
	}
	if climbs := strings.Count(strings.Join(segs[lit:], "/"), ".."); climbs > 0 {
		up := strings.Repeat("../", climbs)
		if prefix != "" {
			up = prefix + "/" + up
		}
		prefix = up
	}
	return shellparse.Resolve(root, prefix)
}

var dropTabsAndNewlines = strings.NewReplacer("\t", "", "\n", "", "\r", "")

// hostOf is the host a URL names, as a WHATWG URL parser (Node's, which the runtimes use) reads
// it where net/url can follow: tabs and newlines dropped, and in http(s), ws(s) and ftp URLs
// backslashes read as slashes. "" when the URL has no host or does not parse.
func hostOf(raw string) string {
	s := strings.TrimFunc(raw, func(r rune) bool { return r <= ' ' })
	if strings.ContainsAny(s, "\t\n\r") {
		s = dropTabsAndNewlines.Replace(s)
	}
	if scheme, rest, ok := strings.Cut(s, ":"); ok {
		switch strings.ToLower(scheme) {
		case "http", "https", "ws", "wss", "ftp":
			s = scheme + ":" + strings.ReplaceAll(rest, `\`, "/")
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
}

// viewCache is the view of an activation's call, built on first use and shared by the rules'
// prefilters (prefilter_elements.go) and CEL (callValue), so a decision parses a command line
// once, and both read the same view.
type viewCache struct {
	callView  CallView
	viewBuilt bool
}

// viewOfCall is the view of the activation's call.
func (a *activation) viewOfCall() *CallView {
	if !a.viewBuilt {
		a.callView, a.viewBuilt = viewOf(a.tool, a.input, a.cwd), true
	}
	return &a.callView
}

// callValue is the CEL value of the activation's call's view. It points into the activation,
// which outlives no decision, as no CEL value does.
func (a *activation) callValue() ref.Val {
	env, err := environment()
	if err != nil {
		return types.NewErr("the CEL environment cannot be built")
	}
	return env.CELTypeAdapter().NativeToValue(a.viewOfCall())
}
