package shellparse

import (
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// The shell view of a call: the commands a POSIX/Bash command line would run, parsed with
// mvdan.cc/sh (Bash dialect), never executed. What the parser cannot decide statically is marked
// rather than guessed:
//
//   - a word with a parameter expansion, command substitution, arithmetic, process substitution,
//     extended glob, or a glob segment that could match "." or ".." (".*", ".?") is not static:
//     its command is not `known`, and the word is given as written;
//   - a command name that is not static, code run from text that is not static (eval, sh -c,
//     trap, alias), a redirection to a target that is not static, text that does not parse, or
//     text over the bounds below make the whole line not known (ShellKnown false).
//
// Quotes and escapes are resolved ('r”m', \r\m and $'\x72m' are all rm), brace expansions are
// expanded, and the commands inside pipelines, && / || / ; lists, subshells, blocks, compound
// commands, function bodies, command and process substitutions and here-documents are all
// listed, in source order. The code given to eval, sh -c (bash, dash, zsh, ...), trap and alias
// is parsed in turn, and the command a wrapper runs (sudo, env, exec, command, nohup, nice,
// time, timeout, xargs, find -exec, ...) is listed too, after the wrapper.
const (
	// MaxShellBytes bounds the command text the gate parses; longer text is not parsed.
	MaxShellBytes = 128 << 10
	// MaxShellCommands bounds the commands listed for one call.
	MaxShellCommands = 256
	// MaxShellWords bounds the words (command names and arguments) listed for one call.
	MaxShellWords = 4096
	// maxShellDepth bounds code parsed from code (eval "sh -c '...'").
	maxShellDepth = 4
	// maxBraceFields bounds the words one brace expansion may produce.
	maxBraceFields = 256
	// MaxShellNesting bounds how deep brackets nest in the text ((, {, $(, ${ ...), counted
	// before parsing, quotes ignored: deeper text is not parsed (a parser's time grows
	// faster than linearly with nesting).
	MaxShellNesting = 128
)

// Command is one command a shell line would run (call.commands).
type Command struct {
	// Name is the command's name: the last element of the command word ("rm" for /bin/rm);
	// empty when the word is not static.
	Name string `json:"name" cel:"name"`
	// Exe is the command word as the shell would look it up ("/bin/rm", "./build.sh", "rm").
	Exe string `json:"exe" cel:"exe"`
	// Args are the arguments after the command word, quotes resolved; a word that is not static
	// is given as written ("$HOME", "$(pwd)/x").
	Args []string `json:"args" cel:"args"`
	// Cwd is the directory the command runs in, as far as the line says (a leading `cd dir &&`
	// is followed); empty when it is not known.
	Cwd string `json:"cwd" cel:"cwd"`
	// Known is false when the name, an argument or a redirection target is not static, or the
	// command gets arguments the line does not show (xargs, find -exec ... {}).
	Known bool `json:"known" cel:"known"`
	// Redirects are the redirections of the command's statement.
	Redirects []Redirect `json:"redirects" cel:"redirects"`
}

// Redirect is one redirection: Op is the operator as written (">", ">>", "<", "2>", "&>",
// "<<", "<<<", ">&", ...) with its file descriptor, and Target the file (a path, as written),
// the descriptor duplicated ("1"), the here-document delimiter or the here-string.
type Redirect struct {
	Op     string `json:"op" cel:"op"`
	Target string `json:"target" cel:"target"`
}

// Result is what Parse finds: the commands, whether all is static, and the files the
// shell itself opens for redirections (resolved against each statement's directory) and the
// URLs among the static arguments.
type Result struct {
	Commands      []Command
	Known         bool
	Reads, Writes []string
	URLs          []string
}

// Parse parses a command line run in directory cwd ("" when not known).
func Parse(src, cwd string) Result {
	w := &shellWalker{view: Result{Known: true}}
	if len(src) > MaxShellBytes || nesting(src) > MaxShellNesting {
		w.view.Known = false
		return w.view
	}
	w.parse(src, cwd, 0, true)
	return w.view
}

// nesting is the deepest the brackets of src nest, quotes and escapes ignored (an upper bound of
// the depth of the syntax tree's nested commands and expressions).
func nesting(src string) int {
	depth, deepest := 0, 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '(', '{', '[':
			if depth++; depth > deepest {
				deepest = depth
			}
		case ')', '}', ']':
			depth = max(depth-1, 0)
		}
	}
	return deepest
}

type shellWalker struct {
	view  Result
	words int
	full  bool   // the bounds are reached
	src   string // the text being walked, for words given as written
	// tainted marks commands found in code whose arguments the line does not show (the code of
	// `xargs sh -c '...'`), so none of them is known.
	tainted bool
}

func (w *shellWalker) unknown() { w.view.Known = false }

// parse walks src as a list of statements run in cwd.
func (w *shellWalker) parse(src, cwd string, depth int, top bool) {
	if depth > maxShellDepth {
		w.unknown()
		return
	}
	f, err := parseBash(src)
	if err != nil {
		w.unknown()
		if top {
			w.view.Commands = nil
		}
		return
	}
	saved := w.src
	w.src = src
	w.stmts(f.Stmts, cwd, depth)
	w.src = saved
}

// parsers recycles Bash parsers: a Parser holds two kilobytes of buffers, and mvdan.cc/sh lets
// one be reused once a Parse is done (the tree it returns owns none of them, so code found in it
// can be parsed with the same parser while it is walked).
var parsers = sync.Pool{New: func() any { return &bashParser{p: syntax.NewParser(syntax.Variant(syntax.LangBash))} }}

type bashParser struct {
	p *syntax.Parser
	r strings.Reader
}

func parseBash(src string) (*syntax.File, error) {
	bp := parsers.Get().(*bashParser)
	bp.r.Reset(src)
	f, err := bp.p.Parse(&bp.r, "")
	bp.r.Reset("")
	parsers.Put(bp) // not when Parse panics: a parser left mid-parse is not reused
	return f, err
}

// The walk follows the working directory as a value: "" when not known. A statement ends in one
// directory if it succeeds and another if it fails (cd dir fails and leaves the directory as it
// was), so `cd dir && cmd` runs cmd in dir while `cd dir; cmd` runs it in a directory not known.
type dirs struct{ ok, failed string }

func same(d string) dirs { return dirs{d, d} }

func merge(a, b string) string {
	if a == b {
		return a
	}
	return ""
}

func (w *shellWalker) stmts(list []*syntax.Stmt, cwd string, depth int) string {
	for _, s := range list {
		d := w.stmt(s, cwd, depth)
		cwd = merge(d.ok, d.failed)
	}
	return cwd
}

func (w *shellWalker) stmt(s *syntax.Stmt, cwd string, depth int) dirs {
	if w.full {
		return same("") // past the bounds: the line is not known, and nothing more is listed
	}
	redirs, static := w.redirects(s.Redirs, cwd, depth)
	var d dirs
	switch c := s.Cmd.(type) {
	case nil:
		d = same(cwd)
	case *syntax.CallExpr:
		d = w.call(c, cwd, depth, redirs, static)
	default:
		d = w.command(c, cwd, depth)
	}
	if s.Background || s.Coprocess || s.Disown {
		return same(cwd) // runs in a subshell of its own
	}
	if s.Negated {
		d.ok, d.failed = d.failed, d.ok
	}
	return d
}

func (w *shellWalker) command(cmd syntax.Command, cwd string, depth int) dirs {
	switch c := cmd.(type) {
	case *syntax.BinaryCmd:
		return w.binary(c, cwd, depth)
	case *syntax.Block:
		return same(w.stmts(c.Stmts, cwd, depth))
	case *syntax.Subshell:
		w.stmts(c.Stmts, cwd, depth)
		return same(cwd)
	case *syntax.TimeClause:
		if c.Stmt != nil {
			return w.stmt(c.Stmt, cwd, depth)
		}
		return same(cwd)
	case *syntax.FuncDecl:
		// The body runs when the function is called, from wherever that is.
		w.stmt(c.Body, "", depth)
		return same(cwd)
	case *syntax.CoprocClause:
		w.stmt(c.Stmt, cwd, depth)
		return same(cwd)
	case *syntax.DeclClause:
		return w.decl(c, cwd, depth)
	default:
		return same(w.compound(cmd, cwd, depth))
	}
}

// compound walks if, while, for, case, [[ ]], (( )) and let: the commands in their parts, each
// from cwd; the directory after it is cwd only if no part can change it.
func (w *shellWalker) compound(cmd syntax.Command, cwd string, depth int) string {
	after := cwd
	syntax.Walk(cmd, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			if d := w.stmt(n, cwd, depth); d.ok != cwd || d.failed != cwd {
				after = ""
			}
			return false
		case *syntax.CmdSubst:
			w.stmts(n.Stmts, cwd, depth)
			return false
		case *syntax.ProcSubst:
			w.stmts(n.Stmts, cwd, depth)
			return false
		}
		return true
	})
	return after
}

// substitutions walks the command and process substitutions inside a node (a word, an
// assignment), which run before the command they are part of, in a subshell.
func (w *shellWalker) substitutions(n syntax.Node, cwd string, depth int) {
	if wd, ok := n.(*syntax.Word); ok && quotedOrLiteral(wd) {
		return // no part of it can hold one
	}
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst:
			w.stmts(n.Stmts, cwd, depth)
			return false
		case *syntax.ProcSubst:
			w.stmts(n.Stmts, cwd, depth)
			return false
		}
		return true
	})
}

// quotedOrLiteral reports a word made only of literals and single-quoted strings.
func quotedOrLiteral(wd *syntax.Word) bool {
	for _, p := range wd.Parts {
		switch p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		default:
			return false
		}
	}
	return true
}

func (w *shellWalker) binary(b *syntax.BinaryCmd, cwd string, depth int) dirs {
	switch b.Op {
	case syntax.AndStmt:
		x := w.stmt(b.X, cwd, depth)
		y := w.stmt(b.Y, x.ok, depth)
		return dirs{y.ok, merge(x.failed, y.failed)}
	case syntax.OrStmt:
		x := w.stmt(b.X, cwd, depth)
		y := w.stmt(b.Y, x.failed, depth)
		return dirs{merge(x.ok, y.ok), y.failed}
	default: // pipelines: each side runs in a subshell
		w.stmt(b.X, cwd, depth)
		w.stmt(b.Y, cwd, depth)
		return same(cwd)
	}
}

// text is a node's source, as written; "" for a node with no position.
func (w *shellWalker) text(n syntax.Node) (s string) {
	defer func() {
		if recover() != nil {
			s = "" // a node the parser built without parts has no position
		}
	}()
	start, end := int(n.Pos().Offset()), int(n.End().Offset())
	if start < 0 || end > len(w.src) || start > end {
		return ""
	}
	return w.src[start:end]
}
