// Command gate-client is what the PreToolUse wrapper runs in a pod with the gate-agent sidecar:
// it puts the call to the sidecar and prints the sidecar's answer, byte for byte, with its exit
// status. On any failure (no socket, no answer in time, an answer cut short, malformed, for
// another nonce or another version of the policy volume) it replaces itself with gate-hook,
// which decides the call as it always has and records in the fallback spool that it did so.
// It never lets a call through that nothing evaluated: if even gate-hook cannot be started, it
// refuses the call.
//
//	gate-client --socket PATH --runtime claude-code [--deadline-ms N] --fallback GATE_HOOK [--fallback-spool PATH] -- GATE_HOOK_ARGS...
//
// GATE_HOOK_ARGS are the wrapper's arguments to gate-hook (--snapshot S [--workspace W]
// [--layers] [--explicit-allow] --answer-token T): the bundle directory (the snapshot's), the
// workspace, the flags and the token are read from them, and gate-hook gets them unchanged.
//
// It starts about as fast as a no-op binary: it imports syscall and nothing else that
// initializes at start-up (not os, time, strings or golang.org/x/sys/unix, not even
// internal/agentproto, which imports bytes; proto.go spells its part of the protocol again).
package main

import (
	"syscall"
	_ "unsafe" // go:linkname, for the arguments
)

// defaultDeadline is how long the client waits for the sidecar, connecting included, before it
// hands the call to gate-hook: well inside the wrapper's own limit on the hook (seconds), so
// gate-hook has the rest of it. maxDeadline keeps a configured one there too. In nanoseconds.
const (
	millisecond     = int64(1e6)
	defaultDeadline = 1500 * millisecond
	maxDeadline     = 5000 * millisecond
)

// runtimeArgs is os.Args without package os, whose start-up (with internal/godebug's, which it
// imports) the client does not pay: the runtime hands the process's arguments to os alone, by
// this symbol. Should a Go release stop letting it be referenced, the link fails.
//
//go:linkname runtimeArgs os.runtime_args
func runtimeArgs() []string

func main() { syscall.Exit(run(runtimeArgs()[1:])) }

func run(args []string) int {
	cfg, ok := parseArgs(args)
	hook, hookOK := parseHookArgs(cfg.hookArgs)
	if !ok {
		return deny(cfg.runtime, hook.token, "gate-client was started with invalid arguments")
	}
	input, ok := readInput()
	if !ok {
		return deny(cfg.runtime, hook.token, "gate-client could not read the hook input")
	}
	// The sidecar answers in the client's runtime; gate-hook, in the one its arguments name. Were
	// they different, the two would answer the same call differently: gate-hook decides.
	if !hookOK || hook.runtimeOf() != cfg.runtime {
		return fallBack(cfg, input, fallbackArgs)
	}
	if len(input) > maxInput {
		return fallBack(cfg, input, fallbackInputTooLarge)
	}
	version, ok := volumeVersion(dirOf(hook.snapshot))
	if !ok {
		return fallBack(cfg, input, fallbackNoVolume)
	}
	nonce, ok := newNonce()
	if !ok {
		return fallBack(cfg, input, fallbackUnreachable)
	}
	req := request{nonce: nonce, runtime: cfg.runtime, version: version, token: hook.token,
		layers: hook.layers, explicitAllow: hook.explicitAllow, workspace: hook.workspace, input: input}
	msg, ok := encodeRequest(&req)
	if !ok {
		return fallBack(cfg, input, fallbackArgs)
	}
	resp, reason := ask(cfg.socket, msg, monotonic()+cfg.deadline)
	switch {
	case reason != "":
		return fallBack(cfg, input, reason)
	case resp.nonce != nonce:
		return fallBack(cfg, input, fallbackGarbage)
	case resp.version != version:
		return fallBack(cfg, input, fallbackVersion)
	}
	return printAnswer(resp)
}

// printAnswer prints the sidecar's answer, stdout in one write and then stderr, and returns its exit
// status. An answer that cannot be delivered is a refusal: the answer line a registered command
// checks may not have gone out.
func printAnswer(resp response) int {
	if !writeAll(1, resp.stdout) {
		writeAll(2, []byte(refusalPrefix+"gate-client could not write its answer\n"))
		return 2
	}
	writeAll(2, resp.stderr)
	return resp.exit
}

// fallBack replaces this process with gate-hook, given the call's input on stdin and its
// arguments after the reason and the spool (first, so that gate-hook reads them whatever its own
// arguments hold). It returns only if gate-hook could not be started, refusing the call.
func fallBack(cfg config, input []byte, reason string) int {
	args := make([]string, 0, len(cfg.hookArgs)+4)
	args = append(args, "--fallback-reason", reason)
	if cfg.spool != "" {
		args = append(args, "--fallback-spool", cfg.spool)
	}
	args = append(args, cfg.hookArgs...)
	_ = execWithStdin(cfg.fallback, args, syscall.Environ(), input)
	hook, _ := parseHookArgs(cfg.hookArgs)
	return deny(cfg.runtime, hook.token, "gate-client could not start gate-hook")
}

// deny refuses the call as the wrapper's own deny does: the answer line when the token is
// one, the deny JSON of the runtime on stdout (Gemini CLI's for gemini-cli, Claude Code's, which
// Codex takes too, for the others), the message on stderr, exit 2, a deny for every runtime.
// msg holds no character JSON escapes. The shapes are runtimes.Runtime.Deny's, spelled here so
// the client links none of the runtimes' packages; a test holds the two to each other.
func deny(rt, token, msg string) int {
	msg = refusalPrefix + msg
	var out []byte
	if validToken(token) {
		out = append(out, answerPrefix+token+"\n"...)
	}
	if rt == "gemini-cli" {
		out = append(out, `{"decision":"deny","reason":"`+msg+`"}`+"\n"...)
	} else {
		out = append(out, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"`+msg+`"}}`+"\n"...)
	}
	writeAll(1, out)
	writeAll(2, []byte(msg+"\n"))
	return 2
}
