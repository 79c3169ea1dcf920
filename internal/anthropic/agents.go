package anthropic

import (
	"cmp"
	"context"
	"slices"
	"strings"
)

// Agent is the part of an agent object (GET /v1/agents/{agent_id}, the SDK's
// BetaManagedAgentsAgent) that says which tools its sessions run and under which permission
// policy.
type Agent struct {
	ID      string      `json:"id"`
	Version int         `json:"version"`
	Name    string      `json:"name"`
	Tools   []AgentTool `json:"tools"`
}

// AgentTool is one entry of an agent's tools: a toolset (the built-in agent_toolset_20260401,
// or an MCP server's mcp_toolset) with its default_config and per-tool configs, or a custom
// tool, which the client runs and no permission policy covers.
type AgentTool struct {
	Type          string       `json:"type"`
	Name          string       `json:"name,omitempty"`            // custom
	MCPServerName string       `json:"mcp_server_name,omitempty"` // mcp_toolset
	DefaultConfig *ToolConfig  `json:"default_config,omitempty"`
	Configs       []ToolConfig `json:"configs,omitempty"`
}

// ToolConfig is a toolset's default_config (no Name) or one tool's config. Responses carry
// them resolved, every field set; the pointers tell a field left out from a zero value.
type ToolConfig struct {
	Name             string            `json:"name,omitempty"`
	Enabled          *bool             `json:"enabled,omitempty"`
	PermissionPolicy *PermissionPolicy `json:"permission_policy,omitempty"`
}

// PermissionPolicy is an open union keyed by type: always_allow, always_ask or auto.
type PermissionPolicy struct {
	Type string `json:"type"`
}

// Permission policies (specs §6).
const (
	PolicyAlwaysAllow = "always_allow"
	PolicyAlwaysAsk   = "always_ask"
	PolicyAuto        = "auto"
)

// Tool types of an agent's tools.
const (
	toolsetAgentPrefix = "agent_toolset_" // agent_toolset_20260401
	ToolsetMCP         = "mcp_toolset"
	ToolCustom         = "custom"
)

// AgentToolsetTools are the tools of agent_toolset_20260401 (the SDK's
// BetaManagedAgentsAgentToolConfig union).
var AgentToolsetTools = []string{"bash", "edit", "read", "write", "glob", "grep", "web_fetch", "web_search"}

// GetAgent fetches the agent's current version.
func (c *Client) GetAgent(ctx context.Context, agentID string) (*Agent, error) {
	return getOne[Agent](ctx, c, "/v1/agents", "agent_id", agentID)
}

// ToolPolicy is the permission policy one tool of an agent runs under.
type ToolPolicy struct {
	// Tool names it: a built-in tool ("bash"), or an MCP tool as "<server>/<tool>", where
	// "<server>/*" stands for the server's tools that no config names. A toolset type this
	// package does not know is named by its type in place of a server.
	Tool string
	// MCP is set for the tools of an MCP server.
	MCP     bool
	Enabled bool
	Policy  string
}

// ToolPolicies resolves the policy of each tool of the agent's toolsets: a tool's config
// overrides its toolset's default_config field by field. A left-out enabled is true (the API's
// documented default); a left-out permission_policy is always_allow, the toolset's default in
// Anthropic's documentation (the SDK states none, and responses carry the resolved policy, so
// this applies only to a response that leaves it out). Custom tools are not listed.
func (a *Agent) ToolPolicies() []ToolPolicy {
	var out []ToolPolicy
	for _, t := range a.Tools {
		if t.Type == ToolCustom {
			continue
		}
		var dc ToolConfig
		if t.DefaultConfig != nil {
			dc = *t.DefaultConfig
		}
		def := resolve(dc, true, PolicyAlwaysAllow)
		if strings.HasPrefix(t.Type, toolsetAgentPrefix) {
			for _, name := range AgentToolsetTools {
				def.Tool = name
				out = append(out, def)
			}
			for _, c := range t.Configs {
				p := resolve(c, def.Enabled, def.Policy)
				p.Tool = c.Name
				if i := slices.IndexFunc(out, func(o ToolPolicy) bool { return !o.MCP && o.Tool == c.Name }); i >= 0 {
					out[i] = p
				} else {
					out = append(out, p)
				}
			}
			continue
		}
		server := cmp.Or(t.MCPServerName, t.Type)
		for _, c := range t.Configs {
			p := resolve(c, def.Enabled, def.Policy)
			p.Tool, p.MCP = server+"/"+c.Name, true
			out = append(out, p)
		}
		def.Tool, def.MCP = server+"/*", true
		out = append(out, def)
	}
	return out
}

// resolve is c's fields, each left out taken from the given ones.
func resolve(c ToolConfig, enabled bool, policy string) ToolPolicy {
	p := ToolPolicy{Enabled: enabled, Policy: policy}
	if c.Enabled != nil {
		p.Enabled = *c.Enabled
	}
	if c.PermissionPolicy != nil && c.PermissionPolicy.Type != "" {
		p.Policy = c.PermissionPolicy.Type
	}
	return p
}
