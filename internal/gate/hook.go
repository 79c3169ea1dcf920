package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The Claude Code PreToolUse hook contract (specs/harness-workflow-wire.md section 4).

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

// ReadHookInput reads at most MaxHookInput bytes of hook JSON and returns the call it
// describes. Oversized, malformed or incomplete input is an error; the caller blocks.
func ReadHookInput(r io.Reader) (*Call, *HookInput, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxHookInput+1))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the hook input: %w", err)
	}
	if len(data) > MaxHookInput {
		return nil, nil, fmt.Errorf("the hook input is larger than %d bytes", MaxHookInput)
	}
	return ParseHookInput(data)
}

// ParseHookInput parses PreToolUse hook JSON into a call on the hook surface.
func ParseHookInput(data []byte) (*Call, *HookInput, error) {
	var in HookInput
	if err := decodeJSON(data, &in, true); err != nil {
		return nil, nil, fmt.Errorf("the hook input is not valid JSON: %w", err)
	}
	if in.HookEventName != "" && in.HookEventName != "PreToolUse" {
		return nil, nil, fmt.Errorf("the gate answers PreToolUse, not %q", in.HookEventName)
	}
	if in.ToolName == "" {
		return nil, nil, errors.New("the hook input has no tool_name")
	}
	input, err := RenderRawInput(in.ToolInput)
	if err != nil {
		return nil, nil, fmt.Errorf("tool_input cannot be judged: %w", err)
	}
	call := &Call{Tool: in.ToolName, Input: input, Surface: SurfaceHook, Session: in.SessionID, Cwd: in.Cwd}
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
func HookResponse(d Decision, explicitAllow bool) (stdout []byte, stderr string, exit int) {
	out := HookOutput{SystemMessage: d.AuditNote(), HookSpecificOutput: HookSpecificOutput{HookEventName: "PreToolUse"}}
	switch d.Verdict {
	case Allow:
		if !explicitAllow {
			if out.SystemMessage == "" {
				return nil, "", 0
			}
			break
		}
		out.HookSpecificOutput.PermissionDecision = "allow"
		out.HookSpecificOutput.PermissionDecisionReason = d.Reason
	case Ask:
		out.HookSpecificOutput.PermissionDecision = "ask"
		out.HookSpecificOutput.PermissionDecisionReason = d.Reason
	default:
		msg := d.Message
		if msg == "" {
			msg = RefusalPrefix + d.Reason
		}
		out.HookSpecificOutput.PermissionDecision = "deny"
		out.HookSpecificOutput.PermissionDecisionReason = msg
		stderr, exit = msg, 2
	}
	b, err := json.Marshal(out)
	if err != nil {
		// Marshalling fixed string fields cannot fail; were it to, exit 2 still blocks.
		return nil, RefusalPrefix + "the hook could not encode its answer", 2
	}
	return append(b, '\n'), stderr, exit
}
