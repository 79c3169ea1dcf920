package anthropic_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestGetAgent: an agent the fake holds is read with the headers of every Managed Agents call
// and a key held in memory; its tools resolve to the policy each runs under. An unknown agent
// is the API's 404, a wrong key its 401, and neither error carries the key.
func TestGetAgent(t *testing.T) {
	f := anthropictest.Start(t)
	f.AddAgent(anthropictest.Agent{ID: "agent_tools", Name: "coder", Tools: []anthropictest.Toolset{
		{Default: anthropic.PolicyAlwaysAsk, Configs: []anthropictest.ToolConfig{{Name: "web_fetch", Policy: anthropic.PolicyAlwaysAllow}, {Name: "bash", Enabled: ptr.To(false)}}},
		{MCPServer: "deploy", Configs: []anthropictest.ToolConfig{{Name: "release", Policy: anthropic.PolicyAuto}}},
	}, CustomTools: []string{"lookup"}})
	ctx := testutil.Context(t, 30*time.Second)
	client := func(key string) *anthropic.Client {
		c, err := anthropic.NewClient(anthropic.ClientOptions{BaseURL: f.URL, APIKey: key, RootCAs: f.CertPool(), MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	a, err := client(anthropictest.Key).GetAgent(ctx, "agent_tools")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != "agent_tools" || a.Name != "coder" || a.Version != 1 {
		t.Errorf("agent %+v", a)
	}
	got := policies(a)
	want := "bash off always_ask; edit always_ask; read always_ask; write always_ask; glob always_ask; grep always_ask; web_fetch always_allow; web_search always_ask; " +
		"deploy/release auto; deploy/* always_allow"
	if got != want {
		t.Errorf("tool policies\n got %s\nwant %s", got, want)
	}
	r := f.Requests()[0]
	if r.Method != "GET" || r.Path != "/v1/agents/agent_tools" || r.Header.Get("anthropic-beta") != anthropic.BetaManaged ||
		r.Header.Get("anthropic-version") != anthropic.AnthropicVersion || r.Header.Get("Authorization") != "Bearer "+anthropictest.Key {
		t.Errorf("request %s %s %v", r.Method, r.Path, r.Header)
	}

	for _, c := range []struct {
		key, id string
		status  int
		typ     string
	}{
		{anthropictest.Key, "agent_unknown", 404, "not_found_error"},
		{"sk-ant-wrong-key", "agent_tools", 401, "authentication_error"},
	} {
		_, err := client(c.key).GetAgent(ctx, c.id)
		var ae *anthropic.APIError
		if !errors.As(err, &ae) || ae.Status != c.status || ae.Type != c.typ || !anthropic.IsFatal4xx(err) {
			t.Errorf("GetAgent(%s): want a %d %s, got %v", c.id, c.status, c.typ, err)
		}
		if strings.Contains(err.Error(), c.key) {
			t.Errorf("the error carries the key: %v", err)
		}
	}
	if _, err := client(anthropictest.Key).GetAgent(ctx, ".."); err == nil {
		t.Error("GetAgent(..) was sent")
	}
}

// TestToolPolicies: a tool's config overrides its toolset's default_config field by field; a
// field left out of both is enabled and always_allow; custom tools run under no policy.
func TestToolPolicies(t *testing.T) {
	for _, c := range []struct {
		name, tools, want string
	}{
		{"no default_config: the toolset's defaults", `[{"type":"agent_toolset_20260401"}]`,
			"bash always_allow; edit always_allow; read always_allow; write always_allow; glob always_allow; grep always_allow; web_fetch always_allow; web_search always_allow"},
		{"a config without a policy keeps the default's", `[{"type":"agent_toolset_20260401","default_config":{"enabled":false,"permission_policy":{"type":"auto"}},"configs":[{"name":"bash","type":"bash","enabled":true},{"name":"read","permission_policy":{"type":"always_allow"}}]}]`,
			"bash auto; edit off auto; read off always_allow; write off auto; glob off auto; grep off auto; web_fetch off auto; web_search off auto"},
		{"a tool the package does not know is listed", `[{"type":"agent_toolset_20260401","default_config":{"enabled":true,"permission_policy":{"type":"always_ask"}},"configs":[{"name":"notebook","permission_policy":{"type":"always_allow"}}]}]`,
			"bash always_ask; edit always_ask; read always_ask; write always_ask; glob always_ask; grep always_ask; web_fetch always_ask; web_search always_ask; notebook always_allow"},
		{"MCP: configured tools, then the server's others", `[{"type":"mcp_toolset","mcp_server_name":"github","default_config":{"enabled":true,"permission_policy":{"type":"always_ask"}},"configs":[{"name":"merge","enabled":true,"permission_policy":{"type":"always_allow"}}]}]`,
			"github/merge always_allow; github/* always_ask"},
		{"custom tools are not listed", `[{"type":"custom","name":"lookup","description":"","input_schema":{"type":"object"}}]`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &anthropic.Agent{}
			if err := json.Unmarshal([]byte(`{"id":"agent_x","version":1,"name":"x","tools":`+c.tools+`}`), a); err != nil {
				t.Fatal(err)
			}
			if got := policies(a); got != c.want {
				t.Errorf("\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

// policies writes an agent's tool policies as "tool [off] policy; ...".
func policies(a *anthropic.Agent) string {
	var out []string
	for _, p := range a.ToolPolicies() {
		off := ""
		if !p.Enabled {
			off = " off"
		}
		out = append(out, fmt.Sprintf("%s%s %s", p.Tool, off, p.Policy))
	}
	return strings.Join(out, "; ")
}
