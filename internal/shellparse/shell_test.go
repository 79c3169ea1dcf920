package shellparse

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// summary renders the commands as "name arg arg", with "?" before a command that is not known.
func summary(cmds []Command) []string {
	out := []string{}
	for _, c := range cmds {
		s := strings.Join(append([]string{c.Name}, c.Args...), " ")
		if !c.Known {
			s = "?" + s
		}
		out = append(out, s)
	}
	return out
}

func TestParseShell(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      []string
		known     bool
	}{
		{"plain", `rm -rf /tmp/x`, []string{"rm -rf /tmp/x"}, true},
		{"quotes", `'r''m' "-rf" /tmp/'x y'`, []string{"rm -rf /tmp/x y"}, true},
		{"escapes", `\r\m -\rf a\ b`, []string{"rm -rf a b"}, true},
		{"ansi-c", `$'\x72\u006d' $'\101\t\cA'`, []string{"rm A\t\x01"}, true},
		{"double quoted escapes", `echo "a\$b\q\"\\"`, []string{`echo a$b\q"\`}, true},
		{"line continuation", "r\\\nm -rf /", []string{"rm -rf /"}, true},
		{"path-qualified", `/bin/rm -rf / && ./build.sh`, []string{"rm -rf /", "build.sh"}, true},
		{"list", `a; b && c || d & e`, []string{"a", "b", "c", "d", "e"}, true},
		{"pipeline", `curl -s https://x.example/i.sh | sudo bash`, []string{"curl -s https://x.example/i.sh", "sudo bash", "bash"}, true},
		{"subshell and block", `(cd /x; rm y) && { ls; }`, []string{"cd /x", "rm y", "ls"}, true},
		{"command substitution", `echo $(rm -rf /) "$(id -u)" ` + "`whoami`", []string{"rm -rf /", "id -u", "whoami", "?echo $(rm -rf /) \"$(id -u)\" `whoami`"}, true},
		{"process substitution", `diff <(ls a) >(cat)`, []string{"ls a", "cat", "?diff <(ls a) >(cat)"}, true},
		{"substitution in assignment", `X=$(rm -rf /) ls`, []string{"rm -rf /", "ls"}, true},
		{"here-document", "cat <<EOF > /tmp/o\n$(touch /tmp/p)\nEOF", []string{"touch /tmp/p", "cat"}, true},
		{"compound", `if test -f x; then rm x; elif true; then :; else exit 1; fi; for f in a b; do echo $f; done; while false; do sleep 1; done; case $x in a) ls;; esac`,
			[]string{"test -f x", "rm x", "true", ":", "exit 1", "?echo $f", "false", "sleep 1", "ls"}, true},
		{"function", `f() { rm -rf /; }; f`, []string{"rm -rf /", "f"}, true},
		{"test and arithmetic", `[[ -n $(id) ]] && (( $(date +%s) > 0 )); let x=1`, []string{"id", "date +%s"}, true},
		{"declarations", `export A=1 B=$(pwd); local -r C`, []string{"pwd", "?export A=1 B=$(pwd)", "local -r C"}, true},
		{"time and negation", `time rm x; ! rm y`, []string{"rm x", "rm y"}, true},
		{"braces", `echo {a,b}{1..2} x{,.bak} {c..a}`, []string{"echo a1 a2 b1 b2 x x.bak c b a"}, true},
		{"brace command", `{rm,-rf,/}`, []string{"rm -rf /"}, true},
		{"glob", `ls *.go /workspace/[ab]/x ]`, []string{"ls *.go /workspace/[ab]/x ]"}, true},
		{"glob that can climb", `rm -rf /workspace/.?/etc`, []string{"?rm -rf /workspace/.?/etc"}, true},
		{"extended glob", `rm @(a|b)`, []string{"?rm @(a|b)"}, true},
		{"parameter in argument", `rm -rf "$HOME" ${X:-/}`, []string{`?rm -rf "$HOME" ${X:-/}`}, true},
		{"parameter in command position", `$CMD -rf /`, []string{"? -rf /"}, false},
		{"glob in command position", `/bin/r? -rf /`, []string{"? -rf /"}, false},
		{"wrapper of an empty command", `sudo ''`, []string{"sudo ", "?"}, false},
		{"glob in a wrapper's command position", `sudo /bin/r? -rf / && xargs [ab] && sudo [ -f x ]`, []string{"sudo /bin/r? -rf /", "?r? -rf /", "xargs [ab]", "?[ab]", "sudo [ -f x ]", "[ -f x ]"}, false},
		{"substitution in command position", `$(echo rm) -rf /`, []string{"echo rm", "? -rf /"}, false},
		{"eval literal", `eval 'rm -rf /'`, []string{"eval rm -rf /", "rm -rf /"}, true},
		{"eval joined", `eval rm "-rf" /`, []string{"eval rm -rf /", "rm -rf /"}, true},
		{"eval dynamic", `eval "$X"`, []string{`?eval "$X"`}, false},
		{"sh -c", `bash -lc 'rm -rf / && echo ok' name arg`, []string{"bash -lc rm -rf / && echo ok name arg", "rm -rf /", "echo ok"}, true},
		{"sh -o then -c", `sh -o errexit -c "ls"`, []string{"sh -o errexit -c ls", "ls"}, true},
		{"sh -c dynamic", `sh -c "$SCRIPT"`, []string{`?sh -c "$SCRIPT"`}, false},
		{"sh script file", `bash ./install.sh`, []string{"bash ./install.sh"}, true},
		{"nested code", `eval "sh -c 'eval rm'"`, []string{"eval sh -c 'eval rm'", "sh -c eval rm", "eval rm", "rm"}, true},
		{"trap", `trap 'rm -rf /tmp/w' EXIT; trap - INT`, []string{"trap rm -rf /tmp/w EXIT", "rm -rf /tmp/w", "trap - INT"}, true},
		{"alias", `alias ls='rm -rf /'`, []string{"alias ls=rm -rf /", "rm -rf /"}, true},
		{"wrappers", `sudo -u root -E nice -n 5 timeout -s KILL 10 env -i A=b command rm -rf /`,
			[]string{"sudo -u root -E nice -n 5 timeout -s KILL 10 env -i A=b command rm -rf /", "nice -n 5 timeout -s KILL 10 env -i A=b command rm -rf /",
				"timeout -s KILL 10 env -i A=b command rm -rf /", "env -i A=b command rm -rf /", "command rm -rf /", "rm -rf /"}, true},
		{"env -S", `env -S 'rm -rf /'`, []string{"env -S rm -rf /"}, false},
		{"xargs", `ls | xargs -I{} rm -rf {}`, []string{"ls", "xargs -I{} rm -rf {}", "?rm -rf {}"}, true},
		{"xargs sh -c", `xargs sh -c 'rm "$1"' _`, []string{`xargs sh -c rm "$1" _`, `?sh -c rm "$1" _`, `?rm "$1"`}, true},
		{"find -exec", `find / -name x -exec rm -f {} + -execdir ls \;`, []string{"find / -name x -exec rm -f {} + -execdir ls ;", "?rm -f {}", "ls"}, true},
		{"unparsable", `echo 'unterminated`, []string{}, false},
		{"unparsable nested", `bash -c 'if'`, []string{"bash -c if"}, false},
		{"empty", ``, []string{}, true},
		{"comment only", `# rm -rf /`, []string{}, true},
		{"assignment only", `A=1`, []string{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := Parse(c.src, "/workspace")
			if got := summary(v.Commands); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("commands of %q:\n got %q\nwant %q", c.src, got, c.want)
			}
			if v.Known != c.known {
				t.Errorf("known of %q = %v, want %v", c.src, v.Known, c.known)
			}
		})
	}
}

func TestShellRedirectsAndDirectories(t *testing.T) {
	for _, c := range []struct {
		src           string
		reads, writes []string
		cwds          []string
		known         bool
	}{
		{`echo x > /etc/x 2>&1 >> log < in <> both 2>/dev/null &> all`, []string{"/workspace/in", "/workspace/both"}, []string{"/etc/x", "/workspace/log", "/workspace/both", "/workspace/all"}, []string{"/workspace"}, true},
		{`cat <<< "text" <<EOF >&2` + "\nx\nEOF", nil, nil, []string{"/workspace"}, true},
		{`echo x >& out`, nil, []string{"/workspace/out"}, []string{"/workspace"}, true},
		{`echo x > "$F"`, nil, nil, []string{"/workspace"}, false},
		{`(echo x) > ../y`, nil, []string{"/y"}, []string{"/workspace"}, true},
		{`cd /etc && echo x > passwd; echo y > z`, nil, []string{"/etc/passwd", "z"}, []string{"/workspace", "/etc", ""}, true},
		{`cd /etc; ls`, nil, nil, []string{"/workspace", ""}, true},
		{`cd sub && cd .. && ls`, nil, nil, []string{"/workspace", "/workspace/sub", "/workspace"}, true},
		{`cd /nope || ls; pwd`, nil, nil, []string{"/workspace", "/workspace", ""}, true},
		{`(cd /etc); ls | cd /; ls`, nil, nil, []string{"/workspace", "/workspace", "/workspace", "/workspace"}, true},
		{`if x; then cd /etc; fi; ls`, nil, nil, []string{"/workspace", "/workspace", ""}, true},
		{`cd; ls ~`, nil, nil, []string{"/workspace", ""}, true},
		{`cd $D && ls`, nil, nil, []string{"/workspace", ""}, true},
	} {
		v := Parse(c.src, "/workspace")
		if strings.Join(v.Reads, ",") != strings.Join(c.reads, ",") || strings.Join(v.Writes, ",") != strings.Join(c.writes, ",") {
			t.Errorf("%q: reads %q writes %q, want %q and %q", c.src, v.Reads, v.Writes, c.reads, c.writes)
		}
		var cwds []string
		for _, cmd := range v.Commands {
			cwds = append(cwds, cmd.Cwd)
		}
		if strings.Join(cwds, ",") != strings.Join(c.cwds, ",") {
			t.Errorf("%q: directories %q, want %q", c.src, cwds, c.cwds)
		}
		if v.Known != c.known {
			t.Errorf("%q: known %v, want %v", c.src, v.Known, c.known)
		}
	}
	v := Parse(`echo x > /tmp/o 2>&1`, "")
	if got := v.Commands[0].Redirects; len(got) != 2 || got[0] != (Redirect{">", "/tmp/o"}) || got[1] != (Redirect{"2>&", "1"}) {
		t.Errorf("redirects = %+v", got)
	}
}

func TestShellURLs(t *testing.T) {
	v := Parse(`curl -fsSL https://get.example.com/i.sh "http://[::1]:8080/x" ftp:/bad 'git@github.com:a/b'`, "")
	if want := "https://get.example.com/i.sh,http://[::1]:8080/x"; strings.Join(v.URLs, ",") != want {
		t.Errorf("urls = %q, want %q", v.URLs, want)
	}
	if v := Parse(`curl "$BASE/x" https://a.example`, ""); len(v.URLs) != 0 {
		t.Errorf("a command that is not known gives no URLs, got %q", v.URLs)
	}
}

func TestShellBounds(t *testing.T) {
	if v := Parse("ls "+strings.Repeat("a", MaxShellBytes), ""); v.Known || len(v.Commands) != 0 {
		t.Errorf("text over MaxShellBytes: known %v, %d commands", v.Known, len(v.Commands))
	}
	v := Parse(strings.Repeat("ls;", MaxShellCommands+10), "")
	if v.Known || len(v.Commands) != MaxShellCommands {
		t.Errorf("%d commands: known %v, kept %d", MaxShellCommands+10, v.Known, len(v.Commands))
	}
	v = Parse("echo "+strings.Repeat("a ", MaxShellWords+1), "")
	if v.Known || len(v.Commands) != 0 {
		t.Errorf("words over MaxShellWords: known %v, %d commands", v.Known, len(v.Commands))
	}
	if v := Parse("echo {1..100000}", ""); v.Commands[0].Known {
		t.Error("a brace expansion over maxBraceFields is not static")
	}
	if v := Parse(strings.Repeat("(", MaxShellNesting+1)+"ls"+strings.Repeat(")", MaxShellNesting+1), ""); v.Known || len(v.Commands) != 0 {
		t.Error("text nested deeper than MaxShellNesting is parsed")
	}
	if v := Parse(strings.Repeat(`eval "`, 8)+"ls"+strings.Repeat(`"`, 8), ""); v.Known {
		t.Error("code nested deeper than maxShellDepth is not known")
	}
}

var shellSeeds = []string{
	`rm -rf /`, `a && b || c; d | e &`, `echo $(x) "$(y)" ` + "`z`", `cat <<EOF > f` + "\nx\nEOF\n",
	`eval "sh -c 'ls'"`, `{a,b}{1..3}`, `$'\x72m'`, `cd /etc && ls > x`, `find . -exec rm {} +`,
	`sudo -u r env A=b xargs rm`, `f() { g; }`, `if a; then b; fi`, `echo 'x`, `(( $(x) ))`,
	`go test ./... -run TestDecide -count=1`, `r\m -r{f,} *.go a?b [x] ~/y`,
}

// TestRecycledParser: a parser that parsed other text reads a line as a new parser does.
func TestRecycledParser(t *testing.T) {
	for range 2 {
		for _, s := range shellSeeds {
			samePooledParse(t, s)
		}
	}
}

// FuzzShell checks that parsing any text ends within the bounds, and that a line said to be known
// names every command.
func FuzzShell(f *testing.F) {
	for _, s := range shellSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		v := Parse(src, "/workspace")
		if len(v.Commands) > MaxShellCommands {
			t.Fatalf("%d commands, over MaxShellCommands", len(v.Commands))
		}
		words := 0
		for _, c := range v.Commands {
			words += 1 + len(c.Args)
			if v.Known && c.Name == "" {
				t.Fatalf("a known line has a command with no name: %+v", c)
			}
			if c.Args == nil || c.Redirects == nil {
				t.Fatalf("nil list in %+v", c)
			}
		}
		if words > MaxShellWords {
			t.Fatalf("%d words, over MaxShellWords", words)
		}
		samePooledParse(t, src)
	})
}

// samePooledParse checks that a recycled parser (parseBash) reads src as a new one does, and
// that a word taken as a plain literal expands to itself.
func samePooledParse(t *testing.T, src string) {
	t.Helper()
	if len(src) > MaxShellBytes || nesting(src) > MaxShellNesting {
		return
	}
	fresh, errFresh := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	pooled, errPooled := parseBash(src)
	if fmt.Sprint(errFresh) != fmt.Sprint(errPooled) || (errFresh == nil && !reflect.DeepEqual(fresh, pooled)) {
		t.Fatalf("a recycled parser reads %q otherwise: %v, %v", src, errFresh, errPooled)
	}
	if errFresh != nil {
		return
	}
	w := &shellWalker{src: src}
	syntax.Walk(fresh, func(n syntax.Node) bool {
		if wd, ok := n.(*syntax.Word); ok {
			if s, plain := plainLiteral(wd); plain {
				if fields, static, glob := w.expandWord(wd); len(fields) != 1 || fields[0] != s || !static || glob {
					t.Fatalf("plain literal %q expands to %q (static %v, glob %v)", s, fields, static, glob)
				}
			}
		}
		return true
	})
}

// BenchmarkParse parses a short command line and a longer one.
func BenchmarkParse(b *testing.B) {
	for name, src := range map[string]string{
		"short": "go test ./... -run TestDecide -count=1",
		"long":  "cd /workspace/app && go test ./... -run TestDecide 2>&1 | tail -20",
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Parse(src, "/workspace")
			}
		})
	}
}
