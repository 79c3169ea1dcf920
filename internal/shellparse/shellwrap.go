package shellparse

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// A wrapper runs the command in its operands: sudo rm -rf / runs rm. Options are read as the
// wrapper reads them, so the command is found after the values they take.
type wrapper struct {
	values   string   // short options that take a value (attached, or the next word)
	long     []string // long options that take the next word as value (unless written --x=v)
	operands int      // operands before the command (timeout's duration)
	assigns  bool     // NAME=value operands before the command (env)
	opaque   string   // options after which the command cannot be read (env -S)
	more     bool     // the command gets arguments the line does not show (xargs)
}

var wrappers = map[string]wrapper{
	"sudo":    {values: "CDghpRrTtUu", long: []string{"--chdir", "--close-from", "--group", "--host", "--prompt", "--chroot", "--role", "--type", "--command-timeout", "--other-user", "--user"}},
	"doas":    {values: "Cu"},
	"env":     {values: "uCP", long: []string{"--unset", "--chdir", "--split-string"}, assigns: true, opaque: "S"},
	"exec":    {values: "a"},
	"command": {},
	"builtin": {},
	"nohup":   {},
	"setsid":  {},
	"nice":    {values: "n", long: []string{"--adjustment"}},
	"time":    {values: "fo", long: []string{"--format", "--output"}},
	"timeout": {values: "ks", long: []string{"--kill-after", "--signal"}, operands: 1},
	"stdbuf":  {values: "ioe", long: []string{"--input", "--output", "--error"}},
	"ionice":  {values: "cnpP", long: []string{"--class", "--classdata", "--pid", "--pgid", "--uid"}},
	"xargs":   {values: "aEdILnPs", long: []string{"--arg-file", "--delimiter", "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"}, more: true},
}

// wrapped returns the commands c runs from its operands: a wrapper's command, or find's -exec,
// -execdir, -ok and -okdir commands. opaque reports a wrapper whose command cannot be read.
func wrapped(c Command) (inner []Command, opaque bool) {
	if c.Name == "find" {
		return findCommands(c), false
	}
	spec, ok := wrappers[c.Name]
	if !ok {
		return nil, false
	}
	args, operands := c.Args, spec.operands
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return []Command{innerCommand(c, args[i+1:], spec.more)}, false
			}
			return nil, false
		case strings.HasPrefix(a, "--"):
			if name, _, attached := strings.Cut(a, "="); !attached && contains(spec.long, name) {
				i++
			}
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				if strings.IndexByte(spec.opaque, a[j]) >= 0 {
					return nil, true
				}
				if strings.IndexByte(spec.values, a[j]) >= 0 {
					if j == len(a)-1 {
						i++ // the value is the next word
					}
					break
				}
			}
		case spec.assigns && strings.Contains(a, "=") && syntax.ValidName(a[:strings.IndexByte(a, '=')]):
		case operands > 0:
			operands--
		default:
			return []Command{innerCommand(c, args[i:], spec.more)}, false
		}
	}
	return nil, false
}

func innerCommand(outer Command, argv []string, more bool) Command {
	return Command{Exe: argv[0], Args: argv[1:], Cwd: outer.Cwd, Known: outer.Known && !more}
}

// findCommands returns the commands of find's -exec, -execdir, -ok and -okdir actions; one that
// gets the found files ({}) is not known.
func findCommands(c Command) []Command {
	var out []Command
	args := c.Args
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		end := i + 1
		for end < len(args) && args[end] != ";" && args[end] != "+" {
			end++
		}
		if argv := args[i+1 : end]; len(argv) > 0 {
			placeholder := false
			for _, a := range argv {
				placeholder = placeholder || strings.Contains(a, "{}")
			}
			out = append(out, innerCommand(c, argv, placeholder))
		}
		i = end
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
