#!/bin/sh
# gate-operator hook of Claude Code, Codex and Gemini CLI (rendered by the operator; do not edit).
# Runs gate-hook under a 10s limit, below the 15s timeout registered with each runtime.
# Only exit 0 (allow or ask) and 2 (deny) pass; anything else blocks the call.
PATH=/usr/bin:/bin
export PATH
unset GODEBUG GOGC GOMAXPROCS GOMEMLIMIT GOTRACEBACK
bin='/opt/intutic/bin/gate-hook'
token=$1
runtime=${2:-claude-code}
answered=

deny() {
  [ -n "$token" ] && printf 'gate-answer %s\n' "$token"
  case "$runtime" in
    gemini-cli) printf '{"decision":"deny","reason":"%s"}\n' "$1" ;;
    *) printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"%s"}}\n' "$1" ;;
  esac
  printf '%s\n' "$1" >&2
  answered=2
  exit 2
}

# Every way out passes here, also a shell error that ends the script early (a failed
# redirection of a special builtin exits 1 in some shells): only a decided 0 or 2 leaves.
trap 'case "$answered" in 0|2) exit "$answered" ;; esac; deny "[Intutic Governance] BLOCKED: the gate-hook wrapper failed"' EXIT

[ -x "$bin" ] || deny "[Intutic Governance] BLOCKED: the gate-hook binary is missing"

# gate-hook's arguments; --runtime for every runtime but Claude Code's, gate-hook's default.
set -- --snapshot '/opt/intutic/hooks/policy-snapshot.rules' --workspace 'ws_123' --answer-token "$token"
case "$runtime" in
  claude-code) ;;
  codex|gemini-cli) set -- "$@" --runtime "$runtime" ;;
  *) deny "[Intutic Governance] BLOCKED: the gate-hook wrapper does not know the runtime" ;;
esac

# A background job's stdin is /dev/null in sh, so hand the hook JSON over on fd 3.
# Where the pod has the gate-agent client (installed beside gate-hook with the sidecar), the
# client asks the sidecar and hands the call to gate-hook, with the same arguments, whenever
# the sidecar does not answer it properly; without it, gate-hook decides as it always has.
exec 3<&0
if [ -x '/opt/intutic/bin/gate-client' ]; then
  '/opt/intutic/bin/gate-client' --socket '/run/gate-agent/gate.sock' --runtime "$runtime" --deadline-ms 1500 --fallback "$bin" --fallback-spool '/run/gate-fallback/fallback.ndjson' -- "$@" <&3 3<&- &
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
( trap - EXIT; sleep 10 & s=$!; trap 'kill -9 "$s"; exit 0' TERM; wait "$s"; kill -9 "$pid" ) </dev/null >/dev/null 2>&1 3<&- &
watchdog=$!
trap - TERM
wait "$pid"
status=$?
kill -TERM "$watchdog" 2>/dev/null

case "$status" in
  0|2) answered=$status; exit "$status" ;;
esac
deny "[Intutic Governance] BLOCKED: gate-hook failed (exit status $status)"
