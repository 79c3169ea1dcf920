package main

import (
	"strings"
	"time"

	"github.com/intutic/gate-operator/internal/agentproto"
)

// config is gate-client's own arguments, and gate-hook's after "--".
type config struct {
	socket, runtime, fallback, spool string
	deadline                         time.Duration
	hookArgs                         []string
}

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
	seen := map[string]bool{}
	for i := 0; i < len(own); i += 2 {
		name, value := own[i], own[i+1]
		if seen[name] {
			return cfg, false
		}
		seen[name] = true
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
			ms, ok := atoi(value)
			if !ok || ms < 1 || time.Duration(ms)*time.Millisecond > maxDeadline {
				return cfg, false
			}
			cfg.deadline = time.Duration(ms) * time.Millisecond
		default:
			return cfg, false
		}
	}
	return cfg, cfg.socket != "" && cfg.fallback != "" && agentproto.ValidRuntime(cfg.runtime)
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
	valued := map[string]*string{"--snapshot": &h.snapshot, "--workspace": &h.workspace, "--answer-token": &h.token, "--runtime": &h.runtime}
	ok := true
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(args[i], "=")
		if seen[name] {
			ok = false
		}
		seen[name] = true
		if name == "--layers" || name == "--explicit-allow" {
			if hasValue {
				ok = false
			}
			h.layers = h.layers || name == "--layers"
			h.explicitAllow = h.explicitAllow || name == "--explicit-allow"
			continue
		}
		field, known := valued[name]
		if !known {
			ok = false
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
		*field = value
	}
	ok = ok && h.snapshot != "" && baseOf(h.snapshot) == agentproto.SnapshotFileName &&
		(h.workspace == "" || agentproto.ValidWorkspace(h.workspace)) && (h.token == "" || agentproto.ValidToken(h.token) && h.token != agentproto.None) &&
		(h.runtime == "" || agentproto.ValidRuntime(h.runtime))
	return h, ok
}

// runtimeOf is the runtime gate-hook answers in with these arguments: its --runtime, or its
// default, Claude Code's.
func (h hookArgs) runtimeOf() string {
	if h.runtime == "" {
		return agentproto.RuntimeClaudeCode
	}
	return h.runtime
}

// dirOf is the directory of a path, as far as looking up ..data beside it needs: "." for a
// bare name, "/" for a file in the root.
func dirOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	switch {
	case i < 0:
		return "."
	case i == 0:
		return "/"
	}
	return path[:i]
}

// baseOf is the last element of a path.
func baseOf(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

// atoi parses a decimal of at most 9 digits.
func atoi(s string) (int, bool) {
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
