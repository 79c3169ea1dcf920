// Package runtimes is the one table of the agent runtimes whose hooks the gate answers inside a
// sandbox: each one's name, how its hook input becomes a gate.Call, and how a decision is
// answered in its format. gate-hook (--runtime), the gate-agent sidecar (a request's runtime) and
// the bootstrap bundle (each runtime's registered command) all look runtimes up here, so a
// runtime is added in one place. The contracts themselves live in a package per runtime.
package runtimes

import (
	"slices"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/claudecode"
	"github.com/intutic/gate-operator/internal/runtime/codex"
	"github.com/intutic/gate-operator/internal/runtime/gemini"
)

// Default is the runtime of a hook started without one: Claude Code, the only one before
// Codex and Gemini CLI, so a wrapper or gate-hook of an earlier release means it.
const Default = claudecode.Name

// Runtime is one runtime's hook contract.
type Runtime struct {
	// Name is how the runtime is named on the socket, in flags and in records.
	Name string
	// Parse reads the runtime's hook input into a call on the hook surface; an error is a
	// refusal.
	Parse func(data []byte) (*gate.Call, error)
	// Respond is the runtime's answer to a decision: stdout, the message for stderr, and the exit
	// status. explicitAllow asks for an Allow spelled out where the runtime has one.
	Respond func(d gate.Decision, explicitAllow bool) (stdout []byte, stderr string, exit int)
	// Deny is the stdout of a deny with a message, for the registered command's own refusals.
	Deny func(msg string) []byte
}

var table = []Runtime{
	{
		Name: claudecode.Name,
		Parse: func(data []byte) (*gate.Call, error) {
			c, _, err := claudecode.ParseHookInput(data)
			return c, err
		},
		Respond: claudecode.HookResponse,
		Deny: func(msg string) []byte {
			out, _, _ := claudecode.HookResponse(gate.Decision{Verdict: gate.Block, Message: msg}, false)
			return out
		},
	},
	{
		Name: codex.Name,
		Parse: func(data []byte) (*gate.Call, error) {
			c, _, err := codex.ParseHookInput(data)
			return c, err
		},
		Respond: func(d gate.Decision, _ bool) ([]byte, string, int) { return codex.HookResponse(d) },
		Deny:    codex.Deny,
	},
	{
		Name: gemini.Name,
		Parse: func(data []byte) (*gate.Call, error) {
			c, _, err := gemini.ParseHookInput(data)
			return c, err
		},
		Respond: gemini.HookResponse,
		Deny:    gemini.Deny,
	},
}

// Lookup is the runtime named name.
func Lookup(name string) (Runtime, bool) {
	i := slices.IndexFunc(table, func(r Runtime) bool { return r.Name == name })
	if i < 0 {
		return Runtime{}, false
	}
	return table[i], true
}

// Names are the runtimes' names, Default first.
func Names() []string {
	names := make([]string, len(table))
	for i, r := range table {
		names[i] = r.Name
	}
	return names
}

// Answer is everything a hook prints for a decision, and its exit status: the answer line for
// token when there is one (claudecode.AnswerLine: the registered command of every runtime
// checks it), then Respond's stdout; Respond's message and a newline on stderr. gate-hook prints
// it, and the gate-agent sidecar sends it for gate-client to print, so the two answer the same
// call with the same bytes.
func (r Runtime) Answer(d gate.Decision, token string, explicitAllow bool) (stdout, stderr []byte, exit int) {
	stdout, msg, exit := r.Respond(d, explicitAllow)
	if msg != "" {
		stderr = []byte(msg + "\n")
	}
	return withAnswerLine(token, stdout), stderr, exit
}

// DeferClaudeCode is the stdout of Claude Code's answer holding a call for a human
// (claudecode.DeferResponse, exit 0, nothing on stderr), after the answer line for token as
// Answer prints it. No other runtime can hold a call.
func DeferClaudeCode(reason, token string) []byte {
	return withAnswerLine(token, claudecode.DeferResponse(reason))
}

// withAnswerLine is stdout after the answer line for token, when there is one.
func withAnswerLine(token string, stdout []byte) []byte {
	if token == "" {
		return stdout
	}
	return append(claudecode.AnswerLine(token), stdout...)
}
