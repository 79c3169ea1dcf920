package bootstrap

import (
	"fmt"
	"path"
	"strings"
)

// hookScript renders gate-hook.sh, the POSIX sh wrapper Claude Code runs. It runs gate-hook
// under its own time limit and lets only exit 0 and 2 through: Claude Code treats every other
// status as a non-blocking error and runs the tool, so a missing binary, a crash, a signal or
// the time limit all become a deny, with exit 2.
func hookScript(opts Options, workspaceID string) string {
	ws := ""
	if workspaceID != "" {
		ws = " --workspace " + shellQuote(workspaceID)
	}
	return fmt.Sprintf(`#!/bin/sh
# gate-operator PreToolUse hook (rendered by the operator; do not edit).
# Runs gate-hook under a %[1]ds limit, below the %[2]ds timeout registered with Claude Code.
# Only exit 0 (allow or ask) and 2 (deny) pass; anything else blocks the call.
bin="${INTUTIC_GATE_HOOK_BIN:-%[3]s}"

deny() {
  printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"%%s"}}\n' "$1"
  printf '%%s\n' "$1" >&2
  exit 2
}

[ -x "$bin" ] || deny "[Intutic Governance] BLOCKED: the gate-hook binary is missing"

# A background job's stdin is /dev/null in sh, so hand the hook JSON over on fd 3.
exec 3<&0
"$bin" --snapshot %[4]s%[5]s <&3 3<&- &
pid=$!
# The watchdog holds none of Claude Code's pipes, so it never delays the answer.
( sleep %[1]d; kill -9 "$pid" ) </dev/null >/dev/null 2>&1 3<&- &
watchdog=$!
wait "$pid"
status=$?
kill "$watchdog" 2>/dev/null

case "$status" in
  0|2) exit "$status" ;;
esac
deny "[Intutic Governance] BLOCKED: gate-hook failed (exit status $status)"
`, opts.HookLimit, opts.HookTimeout, DefaultHookBin, shellQuote(path.Join(opts.MountDir, KeySnapshot)), ws)
}

// shellQuote quotes s for POSIX sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellWord is s as one sh word: unchanged when it holds only characters sh never treats
// specially, quoted otherwise.
func shellWord(s string) string {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/._-+", c)) {
			return shellQuote(s)
		}
	}
	return s
}
