// Package gemini is Gemini CLI's contract with the gate: the BeforeTool hook input it writes on a
// hook's stdin and the answers it accepts, as observed on @google/gemini-cli 0.61.0
// (specs/gemini-observed.md, docs/sandbox-integration.md). It turns the one into a gate.Call and
// a gate.Decision into the other; the gate knows nothing of it.
//
// Gemini CLI fails open when a hook exits 1, prints anything but JSON, or outlives its timeout:
// the registered command (internal/bootstrap) is what makes every fault a deny.
package gemini

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/strictjson"
)

// Name is the runtime's name on the gate-agent socket, in gate-hook's --runtime and in records.
const Name = "gemini-cli"

// HookInput is the part of Gemini CLI's BeforeTool stdin the gate uses. Unknown fields are
// ignored.
type HookInput struct {
	SessionID     string          `json:"session_id"`
	HookEventName string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	Cwd           string          `json:"cwd"`
	// MCPContext is set for an MCP tool, whose tool_name is Gemini CLI's own name for it
	// (mcp_<server>_<tool>): the server and the tool's name on it.
	MCPContext *struct {
		ServerName string `json:"server_name"`
		ToolName   string `json:"tool_name"`
	} `json:"mcp_context,omitempty"`
}

// ParseHookInput parses Gemini CLI's BeforeTool hook JSON into a call on the hook surface.
// Malformed or incomplete input is an error; the caller blocks.
func ParseHookInput(data []byte) (*gate.Call, *HookInput, error) {
	var in HookInput
	if err := strictjson.DecodeIgnoringUnknown(data, &in); err != nil {
		return nil, nil, fmt.Errorf("the hook input is not valid JSON: %w", err)
	}
	if in.HookEventName != "BeforeTool" {
		return nil, nil, fmt.Errorf("the gate answers Gemini CLI's BeforeTool, not %q", in.HookEventName)
	}
	if in.ToolName == "" {
		return nil, nil, errors.New("the hook input has no tool_name")
	}
	input, err := gate.RenderRawInput(in.ToolInput)
	if err != nil {
		return nil, nil, fmt.Errorf("tool_input cannot be judged: %w", err)
	}
	call := &gate.Call{Tool: in.ToolName, Input: input, Surface: gate.SurfaceHook, Session: in.SessionID, Cwd: in.Cwd}
	if m := in.MCPContext; m != nil {
		// The call is decided as the tool the CLI calls on the server (tools/call with
		// mcp_context.tool_name), under the server's name, as mcp__<server>__<tool> is on the
		// other surfaces; an incomplete context is refused rather than decided under the CLI's
		// own name.
		if m.ServerName == "" || m.ToolName == "" {
			return nil, nil, errors.New("the hook input's mcp_context names no server or tool")
		}
		call.Tool, call.Server = m.ToolName, m.ServerName
	}
	return call, &in, nil
}

// hookOutput is the BeforeTool JSON a decision is answered with.
type hookOutput struct {
	Decision      string `json:"decision"`
	Reason        string `json:"reason,omitempty"`
	SystemMessage string `json:"systemMessage,omitempty"`
}

// HookResponse is how a decision is answered to Gemini CLI. An Allow prints nothing and exits 0
// (the CLI's own policy still applies) unless explicitAllow, which answers decision "allow". An
// Ask or a Block is a deny: {"decision":"deny"} on stdout, the message on stderr, exit 2, which
// the CLI honours by itself. A verdict recorded and not enforced (Audit) exits 0 with only a
// systemMessage saying so.
func HookResponse(d gate.Decision, explicitAllow bool) (stdout []byte, stderr string, exit int) {
	switch d.Verdict {
	case gate.Allow:
		note := d.AuditNote()
		if !explicitAllow && note == "" {
			return nil, "", 0
		}
		out := hookOutput{SystemMessage: note}
		if explicitAllow {
			out.Decision, out.Reason = "allow", d.Reason
		}
		return line(out), "", 0
	case gate.Ask:
		msg := gate.RefusalPrefix + d.Reason + AskSuffix
		return Deny(msg), msg, 2
	default:
		msg := d.Message
		if msg == "" {
			msg = gate.RefusalPrefix + d.Reason
		}
		return Deny(msg), msg, 2
	}
}

// AskSuffix ends the refusal of an Ask.
const AskSuffix = " (a human must approve this call, and Gemini CLI's hook cannot ask one)"

// Deny is the JSON line of a deny with message msg.
func Deny(msg string) []byte { return line(hookOutput{Decision: "deny", Reason: msg}) }

func line(v hookOutput) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Marshalling fixed string fields cannot fail; were it to, exit 2 still blocks.
		return nil
	}
	return append(b, '\n')
}
