package shellparse

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The commands of a shell line (see Parse): simple commands and declarations, the
// directory cd leaves, the code that eval, sh -c, trap and alias run, and the files that
// redirections open. The commands that wrappers run are in shellwrap.go.

// decl lists declare, export, local, readonly, typeset and nameref as commands: their values can
// hold substitutions, and export changes what later commands see.
func (w *shellWalker) decl(d *syntax.DeclClause, cwd string, depth int) dirs {
	c := Command{Name: d.Variant.Value, Exe: d.Variant.Value, Cwd: cwd, Known: !w.tainted}
	for _, a := range d.Args {
		w.substitutions(a, cwd, depth)
		text := w.text(a)
		if a.Naked && a.Name == nil && a.Value != nil {
			fields, ok := w.word(a.Value)
			c.Args = append(c.Args, fields...)
			c.Known = c.Known && ok
			continue
		}
		if a.Array != nil || a.Index != nil || (a.Value != nil && !w.static(a.Value)) {
			c.Known = false
		}
		c.Args = append(c.Args, text)
	}
	w.add(c)
	return same(cwd)
}

// call lists a simple command with the redirections of its statement.
func (w *shellWalker) call(ce *syntax.CallExpr, cwd string, depth int, redirs []Redirect, static bool) dirs {
	for _, a := range ce.Assigns {
		w.substitutions(a, cwd, depth)
	}
	for _, a := range ce.Args {
		w.substitutions(a, cwd, depth)
	}
	argv := make([]string, 0, len(ce.Args))
	words := true // every word is static
	nameStatic := true
	for i, a := range ce.Args {
		n := len(argv)
		var ok, glob bool
		argv, ok, glob = w.appendWord(argv, a)
		fields := argv[n:]
		if i == 0 && (!ok || glob || len(fields) == 0 || fields[0] == "") {
			nameStatic = false
		}
		words = words && ok
	}
	switch {
	case len(ce.Args) == 0:
		return same(cwd) // assignments only
	case !nameStatic:
		// Which program runs depends on values the gate cannot see.
		w.unknown()
		if len(argv) > 0 {
			argv = argv[1:]
		}
		w.add(Command{Args: argv, Cwd: cwd, Redirects: redirs})
		return same(cwd)
	}
	c := Command{Exe: argv[0], Args: argv[1:], Cwd: cwd, Known: words && static && !w.tainted, Redirects: redirs}
	return w.run(c, words, depth, 0)
}

// run lists the command c (its words resolved; words says they are all static), follows what it
// runs in turn, and returns the directories after it.
func (w *shellWalker) run(c Command, words bool, depth, wraps int) dirs {
	c.Name = commandName(c.Exe)
	cwd := c.Cwd
	if !w.add(c) {
		return same(cwd)
	}
	if c.Known {
		for _, a := range c.Args {
			if isURLArg(a) {
				w.view.URLs = append(w.view.URLs, a)
			}
		}
	}
	switch c.Name {
	case "cd", "pushd":
		return dirs{ok: chdir(c.Args, cwd, c.Known), failed: cwd}
	case "popd":
		return dirs{ok: "", failed: cwd}
	}
	w.code(c, words, depth)
	inner, opaque := wrapped(c)
	if opaque {
		w.unknown()
	}
	for _, in := range inner {
		if in.Exe == "" || mayBeGlob(in.Exe) {
			// As for a command word (call): which program runs is not known (sudo '' runs none,
			// sudo /bin/r? may run rm). Quotes are resolved by now, so a quoted * counts too.
			w.unknown()
			in.Known = false
		}
		if wraps < 8 {
			w.run(in, words, depth, wraps+1)
		}
	}
	return same(cwd)
}

// mayBeGlob reports a word that would be a pattern unquoted: a * or ?, or a [ closed by a
// later ].
func mayBeGlob(s string) bool {
	if strings.ContainsAny(s, "*?") {
		return true
	}
	i := strings.IndexByte(s, '[')
	return i >= 0 && strings.IndexByte(s[i:], ']') > 0
}

// chdir is the directory `cd args` changes to, from cwd.
func chdir(args []string, cwd string, known bool) string {
	var operands []string
	for i, a := range args {
		if a == "--" {
			operands = append(operands, args[i+1:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			continue // -L, -P, -e, -@
		}
		operands = append(operands, a)
	}
	switch {
	case !known || len(operands) > 1:
		return ""
	case len(operands) == 0:
		return "~"
	case operands[0] == "-":
		return "" // the previous directory
	}
	return Resolve(cwd, operands[0])
}

// code parses the code a command runs from its arguments: eval's, sh -c's, trap's and alias's.
func (w *shellWalker) code(c Command, words bool, depth int) {
	var scripts []string
	switch {
	case c.Name == "eval":
		if len(c.Args) > 0 {
			scripts = []string{strings.Join(c.Args, " ")}
		}
	case posixShells[c.Name]:
		if s, ok := shellScript(c.Args); ok {
			scripts = []string{s}
		}
	case c.Name == "trap":
		if s, ok := trapAction(c.Args); ok {
			scripts = []string{s}
		}
	case c.Name == "alias":
		for _, a := range c.Args {
			if _, v, ok := strings.Cut(a, "="); ok {
				scripts = append(scripts, v)
			}
		}
	default:
		return
	}
	if len(scripts) == 0 {
		return
	}
	if !words {
		w.unknown() // code the gate cannot read
		return
	}
	// The commands of code run by a command that is not known (xargs sh -c '...') are not known.
	saved := w.tainted
	w.tainted = w.tainted || !c.Known
	for _, s := range scripts {
		w.parse(s, c.Cwd, depth+1, false)
	}
	w.tainted = saved
}

var posixShells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "rbash": true}

// shellScript is the script of `sh [options] -c script [name [args]]`.
func shellScript(args []string) (string, bool) {
	cmode := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--" || a == "-":
			if cmode && i+1 < len(args) {
				return args[i+1], true
			}
			return "", false
		case a == "-o" || a == "+o" || a == "-O" || a == "+O" || a == "--rcfile" || a == "--init-file":
			i++
		case strings.HasPrefix(a, "--"):
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			cmode = cmode || (a[0] == '-' && strings.ContainsRune(a, 'c'))
		default:
			return a, cmode
		}
	}
	return "", false
}

// trapAction is the code of `trap [--] action conditions...`; trap -l and trap -p list, and
// an action of "-" or a first operand that is a number resets.
func trapAction(args []string) (string, bool) {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 || args[0] == "-" || (len(args[0]) > 1 && args[0][0] == '-') || (args[0] != "" && isFD(args[0])) {
		return "", false
	}
	return args[0], true
}

// add records a command within the bounds; past them the line is not known.
func (w *shellWalker) add(c Command) bool {
	w.words += 1 + len(c.Args)
	if len(w.view.Commands) >= MaxShellCommands || w.words > MaxShellWords {
		w.unknown()
		w.full = true
		return false
	}
	if c.Args == nil {
		c.Args = []string{}
	}
	if c.Redirects == nil {
		c.Redirects = []Redirect{}
	}
	w.view.Commands = append(w.view.Commands, c)
	return true
}

// commandName is the name a command word runs: its last path element.
func commandName(exe string) string {
	if i := strings.LastIndexByte(exe, '/'); i >= 0 && i < len(exe)-1 {
		return exe[i+1:]
	}
	return exe
}

// isURLArg reports an argument that is an absolute URL with a host (scheme://host...).
func isURLArg(a string) bool {
	i := strings.Index(a, "://")
	if i <= 0 || i+3 >= len(a) {
		return false
	}
	for j, r := range a[:i] {
		alpha := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		other := r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'
		if !alpha && (j == 0 || !other) {
			return false
		}
	}
	return true
}

// redirects lists a statement's redirections and records the files they open; static is false
// when a target is not static.
func (w *shellWalker) redirects(rs []*syntax.Redirect, cwd string, depth int) (out []Redirect, static bool) {
	static = true
	for _, r := range rs {
		if r.Hdoc != nil {
			w.substitutions(r.Hdoc, cwd, depth)
		}
		if r.Word == nil {
			continue
		}
		w.substitutions(r.Word, cwd, depth)
		op := r.Op.String()
		if r.N != nil {
			op = r.N.Value + op
		}
		fields, ok := w.word(r.Word)
		target := strings.Join(fields, " ")
		out = append(out, Redirect{Op: op, Target: target})
		read, write := redirectOpens(r.Op, target)
		if !read && !write {
			continue
		}
		if !ok || len(fields) != 1 {
			// The shell opens a file the gate cannot name: it is on no list, and the line is
			// not known.
			static = false
			w.unknown()
			continue
		}
		p := Resolve(cwd, target)
		if read {
			w.view.Reads = append(w.view.Reads, p)
		}
		if write && !isDeviceStream(p) {
			w.view.Writes = append(w.view.Writes, p)
		}
	}
	return out, static
}

// redirectOpens says whether a redirection opens its target as a file for reading or writing.
// Duplications (>&2, <&0, >&-) open no file; >&word with another word is &>word.
func redirectOpens(op syntax.RedirOperator, target string) (read, write bool) {
	switch op {
	case syntax.RdrIn:
		return true, false
	case syntax.RdrInOut:
		return true, true
	case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.AppClob, syntax.RdrAll,
		syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob:
		return false, true
	case syntax.DplIn, syntax.DplOut:
		if isFD(target) {
			return false, false
		}
		return op == syntax.DplIn, op == syntax.DplOut
	}
	return false, false // here-documents and here-strings
}

func isFD(s string) bool {
	s = strings.TrimSuffix(s, "-")
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// isDeviceStream reports the devices a redirection writes without changing any file.
func isDeviceStream(p string) bool {
	switch p {
	case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty":
		return true
	}
	return strings.HasPrefix(p, "/dev/fd/")
}
