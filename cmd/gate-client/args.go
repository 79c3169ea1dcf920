package main

// config is gate-client's own arguments, and gate-hook's after "--".
type config struct {
	socket, runtime, fallback, spool string
	// deadline is how long the client waits for the sidecar, in nanoseconds.
	deadline int64
	hookArgs []string
}

// clientFlags are gate-client's own flags; hookFlags, gate-hook's that the client reads, those
// with a value first, in hookArgs' order.
var (
	clientFlags = [...]string{"--socket", "--runtime", "--fallback", "--fallback-spool", "--deadline-ms"}
	hookFlags   = [...]string{"--snapshot", "--workspace", "--answer-token", "--runtime", "--layers", "--explicit-allow"}
)

// parseArgs reads gate-client's arguments by hand (the flag package's start-up is not free):
// its own, each at most once, as "--name value", then "--", then gate-hook's. The socket, the
// runtime and the fallback are required. gate-hook's arguments are returned whenever there is a
// "--", even with the client's own wrong, so that a refusal can carry the answer line.
func parseArgs(args []string) (config, bool) {
	cfg := config{deadline: defaultDeadline}
	own := args
	found := false
	for i, a := range args {
		if a == "--" {
			own, cfg.hookArgs, found = args[:i], args[i+1:], true
			break
		}
	}
	if !found || len(own)%2 != 0 {
		return cfg, false
	}
	var seen uint
	for i := 0; i < len(own); i += 2 {
		name, value := own[i], own[i+1]
		flag := indexOf(clientFlags[:], name)
		if flag < 0 || seen&(1<<flag) != 0 {
			return cfg, false
		}
		seen |= 1 << flag
		switch name {
		case "--socket":
			cfg.socket = value
		case "--runtime":
			cfg.runtime = value
		case "--fallback":
			cfg.fallback = value
		case "--fallback-spool":
			cfg.spool = value
		case "--deadline-ms":
			ms, ok := decimal(value)
			if !ok || ms < 1 || int64(ms)*millisecond > maxDeadline {
				return cfg, false
			}
			cfg.deadline = int64(ms) * millisecond
		}
	}
	return cfg, cfg.socket != "" && cfg.fallback != "" && validRuntime(cfg.runtime)
}

// hookArgs is what the client reads from gate-hook's arguments.
type hookArgs struct {
	snapshot, workspace, token string
	// runtime is gate-hook's --runtime, "" when absent (gate-hook's default, Claude Code's).
	runtime               string
	layers, explicitAllow bool
}

// parseHookArgs reads gate-hook's arguments as the wrapper writes them: "--name value" or
// "--name=value" for --snapshot, --workspace, --answer-token and --runtime, "--layers" and
// "--explicit-allow" alone, each at most once, --snapshot naming the bundle's snapshot. Anything
// else (a flag unknown here, a repeated one, a positional argument, a value the protocol cannot
// carry as it is) is not ok: gate-hook, which reads them with its own flag parser, judges such
// arguments itself. The token is read whatever else is wrong, for a refusal's answer line.
func parseHookArgs(args []string) (hookArgs, bool) {
	var h hookArgs
	valued := [...]*string{&h.snapshot, &h.workspace, &h.token, &h.runtime}
	ok := true
	var seen uint
	for i := 0; i < len(args); i++ {
		name, value, hasValue := cut(args[i], '=')
		flag := indexOf(hookFlags[:], name)
		if flag < 0 {
			ok = false
			continue
		}
		if seen&(1<<flag) != 0 {
			ok = false
		}
		seen |= 1 << flag
		if flag >= len(valued) {
			if hasValue {
				ok = false
			}
			h.layers = h.layers || name == "--layers"
			h.explicitAllow = h.explicitAllow || name == "--explicit-allow"
			continue
		}
		if !hasValue {
			if i+1 == len(args) {
				ok = false
				break
			}
			i++
			value = args[i]
		}
		*valued[flag] = value
	}
	ok = ok && h.snapshot != "" && baseOf(h.snapshot) == snapshotFileName &&
		(h.workspace == "" || validWorkspace(h.workspace) && h.workspace != none) && (h.token == "" || validToken(h.token) && h.token != none) &&
		(h.runtime == "" || validRuntime(h.runtime))
	return h, ok
}

// runtimeOf is the runtime gate-hook answers in with these arguments: its --runtime, or its
// default, Claude Code's.
func (h hookArgs) runtimeOf() string {
	if h.runtime == "" {
		return runtimeClaudeCode
	}
	return h.runtime
}

// dirOf is the directory of a path, as far as looking up ..data beside it needs: "." for a
// bare name, "/" for a file in the root.
func dirOf(path string) string {
	i := lastSlash(path)
	switch {
	case i < 0:
		return "."
	case i == 0:
		return "/"
	}
	return path[:i]
}

// baseOf is the last element of a path.
func baseOf(path string) string { return path[lastSlash(path)+1:] }

// lastSlash is the index of the last '/' in path, -1 when there is none.
func lastSlash(path string) int {
	i := len(path) - 1
	for i >= 0 && path[i] != '/' {
		i--
	}
	return i
}

// indexOf is the index of s in list, -1 when it is not there.
func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// cut is strings.Cut for a separator of one byte.
func cut(s string, sep byte) (before, after string, found bool) {
	for i := range len(s) {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// decimal parses a decimal of at most 9 digits, leading zeros allowed.
func decimal(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := range len(s) {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
