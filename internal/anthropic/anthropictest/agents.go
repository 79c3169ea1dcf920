package anthropictest

import (
	"cmp"
	"net/http"
	"time"
)

// Agent is a scripted agent, which GET /v1/agents/{id} answers in the API's resolved shape
// (the SDK's BetaManagedAgentsAgent).
type Agent struct {
	ID   string
	Name string // the id when empty
	// Version is the agent's version; 1 when 0.
	Version int
	Tools   []Toolset
	// CustomTools are the names of custom tools (run by the client, under no policy).
	CustomTools []string
}

// Toolset is a toolset of an agent: the built-in agent_toolset_20260401, or an MCP server's.
type Toolset struct {
	// MCPServer makes it the mcp_toolset of that server (listed in mcp_servers too); "" is
	// the built-in toolset.
	MCPServer string
	// Default is default_config's permission policy; "" is always_allow, the API's default.
	Default string
	// Disabled turns default_config.enabled off.
	Disabled bool
	// Configs are the per-tool configs.
	Configs []ToolConfig
}

// ToolConfig is one tool's config in a toolset.
type ToolConfig struct {
	Name string
	// Policy is its permission policy; "" is the toolset's default.
	Policy string
	// Enabled overrides the toolset's default_config.enabled.
	Enabled *bool
}

// AddAgent adds an agent, or replaces the one with its id (its version then goes up unless
// set).
func (s *Server) AddAgent(a Agent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agents == nil {
		s.agents = map[string]map[string]any{}
	}
	if a.Version == 0 {
		a.Version = 1
		if old, ok := s.agents[a.ID]; ok {
			a.Version = old["version"].(int) + 1
		}
	}
	s.agents[a.ID] = agentObject(a, s.clock().UTC().Format(time.RFC3339))
}

// agentObject is the agent as the API returns it: every field of the SDK's type, the tools'
// configs resolved (each with enabled and permission_policy).
func agentObject(a Agent, now string) map[string]any {
	tools, servers := []any{}, []any{}
	for _, ts := range a.Tools {
		def := cmp.Or(ts.Default, "always_allow")
		configs := []any{}
		for _, c := range ts.Configs {
			cfg := map[string]any{"name": c.Name, "enabled": !ts.Disabled,
				"permission_policy": map[string]any{"type": cmp.Or(c.Policy, def)}}
			if c.Enabled != nil {
				cfg["enabled"] = *c.Enabled
			}
			if ts.MCPServer == "" {
				cfg["type"] = c.Name
				if c.Name == "web_fetch" {
					cfg["url_sources"] = nil
				}
			}
			configs = append(configs, cfg)
		}
		tool := map[string]any{"type": "agent_toolset_20260401", "configs": configs,
			"default_config": map[string]any{"enabled": !ts.Disabled, "permission_policy": map[string]any{"type": def}}}
		if ts.MCPServer != "" {
			tool["type"], tool["mcp_server_name"] = "mcp_toolset", ts.MCPServer
			servers = append(servers, mcpServer{Name: ts.MCPServer, Type: "url", URL: "https://mcp.example.com/" + ts.MCPServer})
		}
		tools = append(tools, tool)
	}
	for _, name := range a.CustomTools {
		tools = append(tools, customTool{Type: "custom", Name: name, Description: "a custom tool",
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{}}})
	}
	return map[string]any{
		"id": a.ID, "type": "agent", "name": cmp.Or(a.Name, a.ID), "version": a.Version,
		"archived_at": nil, "created_at": now, "updated_at": now, "description": nil, "system": nil,
		"execution_identity": map[string]any{"type": "service_account"}, "mcp_servers": servers,
		"metadata": map[string]any{}, "model": map[string]any{"id": "claude-opus-5-5", "effort": map[string]any{"type": "high"}},
		"multiagent": nil, "skills": []any{}, "tools": tools,
	}
}

// mcpServer is an entry of an agent's mcp_servers.
type mcpServer struct {
	Name string `json:"name"`
	Type string `json:"type"`
	URL  string `json:"url"`
}

// customTool is a custom tool in an agent's tools.
type customTool struct {
	Type        string         `json:"type"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema"`
}

// agentRoute answers GET /v1/agents/{id}, and reports whether the request was that.
func (s *Server) agentRoute(w http.ResponseWriter, r *http.Request, parts []string) bool {
	if r.Method != http.MethodGet || len(parts) != 3 || parts[0] != "v1" || parts[1] != "agents" {
		return false
	}
	s.getAgent(w, parts[2])
	return true
}

func (s *Server) getAgent(w http.ResponseWriter, id string) {
	s.mu.Lock()
	obj, ok := s.agents[id]
	s.mu.Unlock()
	if !ok {
		errorResponse(w, 404, "not_found_error", "agent not found")
		return
	}
	writeJSON(w, obj)
}
