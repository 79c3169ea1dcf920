// Package claudecode is Claude Code's contract with the gate: the PreToolUse hook input it
// writes on a hook's stdin and the answer it accepts (specs/harness-workflow-wire.md section 4).
// It turns the one into a gate.Call and a gate.Decision into the other; the gate knows nothing
// of it.
package claudecode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/strictjson"
)

// Name is the runtime's name on the gate-agent socket, in gate-hook's --runtime and in records.
const Name = "claude-code"

// MaxHookInput bounds the hook JSON read from stdin; anything larger is refused.
const MaxHookInput = 4 << 20

// HookInput is the part of the PreToolUse stdin the gate uses. Unknown fields are ignored:
// Claude Code adds fields between releases. Field names are case-sensitive, as in JavaScript: a
// field named like one of these in another case is an error, not an alias.
type HookInput struct {
	SessionID     string          `json:"session_id"`
	HookEventName string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     string          `json:"tool_use_id"`
	Cwd           string          `json:"cwd"`
	MCPServer     *struct {
		Name string `json:"name"`
	} `json:"mcp_server,omitempty"`
}

// ReadHookInput reads the hook JSON, at most MaxHookInput bytes: larger input is an error, and
// the caller blocks. The bytes are read once, for ParseHookInput and for a hand-off that passes
// the same input on.
func ReadHookInput(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxHookInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading the hook input: %w", err)
	}
	if len(data) > MaxHookInput {
		return nil, fmt.Errorf("the hook input is larger than %d bytes", MaxHookInput)
	}
	return data, nil
}

// ParseHookInput parses PreToolUse hook JSON into a call on the hook surface. Malformed or
// incomplete input is an error; the caller blocks.
func ParseHookInput(data []byte) (*gate.Call, *HookInput, error) {
	var in HookInput
	if err := strictjson.DecodeIgnoringUnknown(data, &in); err != nil {
		return nil, nil, fmt.Errorf("the hook input is not valid JSON: %w", err)
	}
	if in.HookEventName != "" && in.HookEventName != "PreToolUse" {
		return nil, nil, fmt.Errorf("the gate answers PreToolUse, not %q", in.HookEventName)
	}
	if in.ToolName == "" {
		return nil, nil, errors.New("the hook input has no tool_name")
	}
	input, err := gate.RenderRawInput(in.ToolInput)
	if err != nil {
		return nil, nil, fmt.Errorf("tool_input cannot be judged: %w", err)
	}
	call := &gate.Call{Tool: in.ToolName, Input: input, Surface: gate.SurfaceHook, Session: in.SessionID, Cwd: in.Cwd}
	if in.MCPServer != nil {
		call.Server = in.MCPServer.Name
	}
	return call, &in, nil
}

// HookOutput is the PreToolUse JSON a decision is answered with.
type HookOutput struct {
	// SystemMessage is a warning Claude Code shows the user, not the model; it changes no
	// decision. It carries the AuditNote of a verdict recorded and not enforced.
	SystemMessage      string             `json:"systemMessage,omitempty"`
	HookSpecificOutput HookSpecificOutput `json:"hookSpecificOutput"`
}

// HookSpecificOutput is the PreToolUse part of HookOutput.
type HookSpecificOutput struct {
	HookEventName            string `json:"hookEventName"`
	PermissionDecision       string `json:"permissionDecision,omitempty"`
	PermissionDecisionReason string `json:"permissionDecisionReason,omitempty"`
}

// HookResponse is how gate-hook answers a decision: what to print on stdout and stderr, and the
// exit status. Allow prints nothing (unless explicitAllow), so the agent's own permission
// flow still applies; Ask asks; Block denies with the refusal message and exits 2, which
// Claude Code honours even if it ignored the JSON. A verdict recorded and not enforced (Audit)
// is told to the user as systemMessage, with no permissionDecision of its own and nothing on
// stderr: an audited Block exits 0 and the call proceeds.
func HookResponse(d gate.Decision, explicitAllow bool) (stdout []byte, stderr string, exit int) {
	out := HookOutput{SystemMessage: d.AuditNote(), HookSpecificOutput: HookSpecificOutput{HookEventName: "PreToolUse"}}
	switch d.Verdict {
	case gate.Allow:
		if !explicitAllow {
			if out.SystemMessage == "" {
				return nil, "", 0
			}
			break
		}
		out.HookSpecificOutput.PermissionDecision = "allow"
		out.HookSpecificOutput.PermissionDecisionReason = d.Reason
	case gate.Ask:
		out.HookSpecificOutput.PermissionDecision = "ask"
		out.HookSpecificOutput.PermissionDecisionReason = d.Reason
	default:
		msg := d.Message
		if msg == "" {
			msg = gate.RefusalPrefix + d.Reason
		}
		out.HookSpecificOutput.PermissionDecision = "deny"
		out.HookSpecificOutput.PermissionDecisionReason = msg
		stderr, exit = msg, 2
	}
	b, err := json.Marshal(out)
	if err != nil {
		// Marshalling fixed string fields cannot fail; were it to, exit 2 still blocks.
		return nil, gate.RefusalPrefix + "the hook could not encode its answer", 2
	}
	return append(b, '\n'), stderr, exit
}

// DeferResponse holds a call for a human (permissionDecision "defer", specs/harness-workflow-wire.md
// §6): in print mode Claude Code ends the run with stop_reason "tool_deferred" and the call
// pending, and runs the hook again for it when the session is resumed. It exits 0: the answer
// is the JSON. Elsewhere (an interactive session, a step with several tool calls) Claude Code
// ignores defer with a warning and asks through its own permission flow; the call never runs
// on it.
func DeferResponse(reason string) []byte {
	out := HookOutput{HookSpecificOutput: HookSpecificOutput{HookEventName: "PreToolUse", PermissionDecision: "defer", PermissionDecisionReason: reason}}
	b, err := json.Marshal(out)
	if err != nil {
		// Marshalling fixed string fields cannot fail; were it to, an ask holds the call too.
		return []byte(`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask"}}` + "\n")
	}
	return append(b, '\n')
}

// AnswerPrefix starts the line a decided answer begins with when the registered command hands
// the hook a per-call token (gate-hook --answer-token): "gate-answer <token>", then the answer.
// The registered command lets exit 0 through only after that line, so an exit 0 of anything
// but a decider that was handed this call's token (an empty, truncated or replaced wrapper, a
// shell that ran nothing) is a refusal. The line never reaches Claude Code: the registered
// command strips it.
const AnswerPrefix = "gate-answer "

// MaxAnswerToken bounds the token's length; the registered command passes a UUID (36 bytes).
const MaxAnswerToken = 64

// AnswerLine is the first line of an answer to the call whose token is token.
func AnswerLine(token string) []byte { return []byte(AnswerPrefix + token + "\n") }

// CheckAnswerToken reports whether token can be echoed on the answer line: 1 to
// MaxAnswerToken letters, digits and dashes, so no token can end the line early or carry
// anything but itself.
func CheckAnswerToken(token string) error {
	if token == "" || len(token) > MaxAnswerToken {
		return fmt.Errorf("the answer token must be 1 to %d characters", MaxAnswerToken)
	}
	if strings.ContainsFunc(token, notTokenChar) {
		return errors.New("the answer token may hold only letters, digits and dashes")
	}
	return nil
}

// notTokenChar reports whether c is anything but an ASCII letter, a digit or a dash.
func notTokenChar(c rune) bool {
	return c != '-' && (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z')
}
