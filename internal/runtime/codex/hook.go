// Package codex is OpenAI Codex CLI's contract with the gate: the PreToolUse hook input it writes
// on a hook's stdin and the answers it accepts, as observed on codex-cli 0.171.0
// (specs/codex-observed.md, docs/sandbox-integration.md). It turns the one into a gate.Call and
// a gate.Decision into the other; the gate knows nothing of it.
//
// Codex fails open on every hook failure (a non-zero exit other than 2, a missing command, an
// answer it cannot read, a timeout): the registered command (internal/bootstrap) is what makes
// every fault a deny. Codex rejects permissionDecision "allow" and "ask" as unsupported, which
// is a failed hook and so lets the call run: an Allow is no answer at all, and an Ask, which
// Codex's PreToolUse hook cannot ask, is a deny.
package codex

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/strictjson"
)

// Name is the runtime's name on the gate-agent socket, in gate-hook's --runtime and in records.
const Name = "codex"

// HookInput is the part of Codex's PreToolUse stdin the gate uses. Unknown fields are ignored.
type HookInput struct {
	SessionID     string          `json:"session_id"`
	TurnID        string          `json:"turn_id"`
	HookEventName string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     string          `json:"tool_use_id"`
	Cwd           string          `json:"cwd"`
}

// ParseHookInput parses Codex's PreToolUse hook JSON into a call on the hook surface.
// Malformed or incomplete input is an error; the caller blocks.
func ParseHookInput(data []byte) (*gate.Call, *HookInput, error) {
	var in HookInput
	if err := strictjson.DecodeIgnoringUnknown(data, &in); err != nil {
		return nil, nil, fmt.Errorf("the hook input is not valid JSON: %w", err)
	}
	if in.HookEventName != "PreToolUse" {
		return nil, nil, fmt.Errorf("the gate answers Codex's PreToolUse, not %q", in.HookEventName)
	}
	if in.ToolName == "" {
		return nil, nil, errors.New("the hook input has no tool_name")
	}
	input, err := gate.RenderRawInput(in.ToolInput)
	if err != nil {
		return nil, nil, fmt.Errorf("tool_input cannot be judged: %w", err)
	}
	return &gate.Call{Tool: in.ToolName, Input: input, Surface: gate.SurfaceHook, Session: in.SessionID, Cwd: in.Cwd}, &in, nil
}

// hookOutput is the PreToolUse JSON a deny is answered with, the shape Codex 0.171.0 was seen
// to honour.
type hookOutput struct {
	HookSpecificOutput hookSpecificOutput `json:"hookSpecificOutput"`
}

type hookSpecificOutput struct {
	HookEventName            string `json:"hookEventName"`
	PermissionDecision       string `json:"permissionDecision"`
	PermissionDecisionReason string `json:"permissionDecisionReason"`
}

// HookResponse is how a decision is answered to Codex. An Allow, and any verdict recorded and
// not enforced (Audit), prints nothing and exits 0: Codex runs the call. An Ask or a Block is a
// deny: the JSON deny on stdout, the message on stderr, exit 2 (which Codex honours by itself).
// The message of an Ask says the call needs a human, whom Codex's hook cannot ask.
func HookResponse(d gate.Decision) (stdout []byte, stderr string, exit int) {
	var msg string
	switch d.Verdict {
	case gate.Allow:
		return nil, "", 0
	case gate.Ask:
		msg = gate.RefusalPrefix + d.Reason + AskSuffix
	default:
		msg = d.Message
		if msg == "" {
			msg = gate.RefusalPrefix + d.Reason
		}
	}
	return Deny(msg), msg, 2
}

// AskSuffix ends the refusal of an Ask.
const AskSuffix = " (a human must approve this call, and Codex's hook cannot ask one)"

// Deny is the JSON line of a deny with message msg.
func Deny(msg string) []byte {
	b, err := json.Marshal(hookOutput{HookSpecificOutput: hookSpecificOutput{
		HookEventName: "PreToolUse", PermissionDecision: "deny", PermissionDecisionReason: msg,
	}})
	if err != nil {
		// Marshalling fixed string fields cannot fail; were it to, exit 2 still blocks.
		return nil
	}
	return append(b, '\n')
}
