package bootstrap

import (
	"fmt"
	"path"
	"strings"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/claudecode"
	"github.com/intutic/gate-operator/internal/runtime/gemini"
	"github.com/intutic/gate-operator/internal/runtime/runtimes"
)

// hookScript renders gate-hook.sh, the POSIX sh wrapper the registered command of each runtime
// runs. It runs gate-hook under its own time limit and lets only exit 0 and 2 through: Claude
// Code, Codex and Gemini CLI all treat every other status as a failed hook and run the tool, so a
// missing binary, a crash, a signal, the time limit, or an error of the shell itself all become
// a deny, with exit 2.
//
// Nothing in it comes from the environment: Claude Code hands hooks the env of settings files
// the agent can write, so the binary's path is a literal, PATH is set here for sleep, and the
// Go runtime's knobs are cleared before gate-hook starts.
//
// Its first argument is the registered command's per-call token (registeredCommand): gate-hook
// echoes it before its answer, and so does the wrapper's own deny. Without it (a Claude Code
// session started before an upgrade, whose registered command passes none) gate-hook answers
// as it did before. Its second is the runtime whose hook runs it (internal/runtime/runtimes),
// Claude Code when absent: the wrapper's own deny is in that runtime's format, and gate-client
// and gate-hook read and answer in it. gate-hook gets --runtime only for the others, so a
// gate-hook from before them still answers Claude Code, and refuses every call of the others.
//
// A layered bundle's wrapper passes --layers, which makes the layers index mandatory. A
// gate-hook from before cluster layers refuses the flag, so a pod still running one is blocked
// rather than decided without its cluster layers.
func hookScript(opts Options, workspaceID string, layered bool) string {
	ws := ""
	if workspaceID != "" {
		ws = " --workspace " + shellQuote(workspaceID)
	}
	if layered {
		ws += " --layers"
	}
	return fmt.Sprintf(`#!/bin/sh
# gate-operator hook of Claude Code, Codex and Gemini CLI (rendered by the operator; do not edit).
# Runs gate-hook under a %[1]ds limit, below the %[2]ds timeout registered with each runtime.
# Only exit 0 (allow or ask) and 2 (deny) pass; anything else blocks the call.
PATH=/usr/bin:/bin
export PATH
unset GODEBUG GOGC GOMAXPROCS GOMEMLIMIT GOTRACEBACK
bin=%[3]s
token=$1
runtime=${2:-%[12]s}
answered=

deny() {
  [ -n "$token" ] && printf '%[7]s%%s\n' "$token"
  case "$runtime" in
    %[13]s) printf '{"decision":"deny","reason":"%%s"}\n' "$1" ;;
    *) printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"%%s"}}\n' "$1" ;;
  esac
  printf '%%s\n' "$1" >&2
  answered=2
  exit 2
}

# Every way out passes here, also a shell error that ends the script early (a failed
# redirection of a special builtin exits 1 in some shells): only a decided 0 or 2 leaves.
trap 'case "$answered" in 0|2) exit "$answered" ;; esac; deny "%[6]sthe gate-hook wrapper failed"' EXIT

[ -x "$bin" ] || deny "%[6]sthe gate-hook binary is missing"

# gate-hook's arguments; --runtime for every runtime but Claude Code's, gate-hook's default.
set -- --snapshot %[4]s%[5]s --answer-token "$token"
case "$runtime" in
  %[12]s) ;;
  %[14]s) set -- "$@" --runtime "$runtime" ;;
  *) deny "%[6]sthe gate-hook wrapper does not know the runtime" ;;
esac

# A background job's stdin is /dev/null in sh, so hand the hook JSON over on fd 3.
# Where the pod has the gate-agent client (installed beside gate-hook with the sidecar), the
# client asks the sidecar and hands the call to gate-hook, with the same arguments, whenever
# the sidecar does not answer it properly; without it, gate-hook decides as it always has.
exec 3<&0
if [ -x %[8]s ]; then
  %[8]s --socket %[9]s --runtime "$runtime" --deadline-ms %[10]d --fallback "$bin" --fallback-spool %[11]s -- "$@" <&3 3<&- &
else
  "$bin" "$@" <&3 3<&- &
fi
pid=$!
# The watchdog holds none of the runtime's pipes, so it never delays the answer; it drops the
# EXIT trap it inherits, so ending it can never print a decision. Ended early (TERM), it ends its
# sleep too, so nothing of the call outlives it (a runtime or tracer that waits for every process
# of the hook would otherwise wait out the limit). It starts with TERM ignored, until it has
# dropped the EXIT trap and set its own: a TERM before that is ignored, never an exit that runs
# the inherited trap (which would print a second answer).
trap '' TERM
( trap - EXIT; sleep %[1]d & s=$!; trap 'kill -9 "$s"; exit 0' TERM; wait "$s"; kill -9 "$pid" ) </dev/null >/dev/null 2>&1 3<&- &
watchdog=$!
trap - TERM
wait "$pid"
status=$?
kill -TERM "$watchdog" 2>/dev/null

case "$status" in
  0|2) answered=$status; exit "$status" ;;
esac
deny "%[6]sgate-hook failed (exit status $status)"
`, opts.HookLimit, opts.HookTimeout, shellQuote(opts.HookBin), shellQuote(path.Join(opts.MountDir, KeySnapshot)), ws, gate.RefusalPrefix, claudecode.AnswerPrefix,
		shellQuote(path.Join(path.Dir(opts.HookBin), ClientName)), shellQuote(AgentSocket), ClientDeadlineMillis, shellQuote(FallbackSpool),
		runtimes.Default, gemini.Name, strings.Join(runtimes.Names()[1:], "|"))
}

// shellQuote quotes s for POSIX sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellWord is s as one sh word: unchanged when it holds only characters sh never treats
// specially, quoted otherwise.
func shellWord(s string) string {
	if strings.ContainsFunc(s, shellSpecial) {
		return shellQuote(s)
	}
	return s
}

// shellSpecial reports whether c is anything but a letter, a digit or one of "/._-+".
func shellSpecial(c rune) bool {
	return (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && !strings.ContainsRune("/._-+", c)
}
