package gateagent

import (
	"testing"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateagent/gateagenttest"
)

const token = "0b8e2a4c-5d6f-4a1b-9c3d-7e8f9a0b1c2d"

// refusedBeforeRules are hook inputs gate-hook refuses before it consults the bundle.
var refusedBeforeRules = []gateagenttest.HookCall{
	{Name: "malformed JSON", Input: []byte(`{"tool_name": "Bash", `)},
	{Name: "empty", Input: nil},
	{Name: "no tool_name", Input: []byte(`{"hook_event_name":"PreToolUse"}`)},
	{Name: "another hook event", Input: []byte(`{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}`)},
	{Name: "MCP server contradicting the tool", Input: []byte(`{"hook_event_name":"PreToolUse","tool_name":"mcp__a__b","mcp_server":{"name":"c"},"tool_input":{}}`)},
}

// auditRules are rules of every verdict, for a policy in Audit: a would-block, a would-ask, a
// rule set to Enforce that blocks, and calls nothing holds.
func auditRules() []gate.Rule {
	return []gate.Rule{
		{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.matches("rm\\s+-rf\\s+/")`, Action: gate.Block, Reason: "destructive command on the root filesystem", Code: "destructive_command"},
		{Name: "fetch-needs-human", Tools: []string{"web_fetch"}, When: `!input.url.startsWith("https://github.com/")`, Action: gate.Ask, Reason: "fetching from outside github.com needs a human"},
		{Name: "no-task-stop", Tools: []string{"task_stop"}, Action: gate.Block, Reason: "tasks are not stopped by agents", Enforcement: gate.Enforce},
	}
}

// TestAnswersAsGateHook: the sidecar answers every call with the bytes and exit status gate-hook
// prints for the same call, bundle and flags: each case of the sample policy (Allow, Ask, Block,
// with and without CEL), an Audit policy's would-be verdicts, a layered bundle's, the refusals
// of bundles that do not load or do not bind to the workspace, and of inputs that cannot be
// read; each with and without an answer token and --explicit-allow.
func TestAnswersAsGateHook(t *testing.T) {
	sample, checked, cases := gateagenttest.SamplePolicy(t, "../..")
	audit, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/audited", Generation: 1, Enforcement: gate.Audit}, auditRules())
	if err != nil {
		t.Fatal(err)
	}
	noRm := gate.Rule{Name: "no-rm", Tools: []string{"bash"}, When: `input.command.contains("rm ")`, Action: gate.Block, Reason: "the cluster forbids rm"}
	byCaller := gate.Rule{Name: "agents-pod", Tools: []string{"bash"}, When: `caller.namespace == "agents" && caller.pod == "coding-agent-0" && input.command.contains("whoami")`, Action: gate.Ask, Reason: "who is asking"}
	noCurl := gate.Rule{Name: "no-curl", Tools: []string{"bash"}, When: `input.command.contains("curl")`, Action: gate.Block, Reason: "the namespace forbids curl"}
	web := gate.Requirement{Key: "app", Operator: gate.OperatorIn, Values: []string{"web"}}
	primary, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1}, []gate.Rule{noCurl})
	if err != nil {
		t.Fatal(err)
	}
	layered := gateagenttest.LayeredFiles(t, primary, "coding-agent-0", `app="web"`,
		gateagenttest.NewClusterLayer(t, "baseline", 0, []gate.Rule{noRm, byCaller}),
		gateagenttest.NewClusterLayer(t, "web-tier", 5, []gate.Rule{{Name: "no-stop", Tools: []string{"task_stop"}, Action: gate.Block, Reason: "web pods keep their tasks"}}, web),
		gateagenttest.NewClusterLayer(t, "db-tier", 5, []gate.Rule{{Name: "no-ls", Tools: []string{"bash"}, Action: gate.Block, Reason: "not selected"}}, gate.Requirement{Key: "app", Operator: gate.OperatorIn, Values: []string{"db"}}),
	)
	bash := func(name, command string) gateagenttest.HookCall {
		return gateagenttest.HookCall{Name: name, Input: gateagenttest.Payload("Bash", map[string]any{"command": command})}
	}
	everyday := []gateagenttest.HookCall{
		bash("rm", "rm -rf /tmp/x"), bash("curl", "curl https://example.com"), bash("ls", "ls -la"), bash("whoami", "whoami"),
		{Name: "TaskStop", Input: gateagenttest.Payload("TaskStop", map[string]any{"task_id": "t1"})},
		{Name: "WebFetch elsewhere", Input: gateagenttest.Payload("WebFetch", map[string]any{"url": "https://paste.example/raw", "prompt": "p"})},
		bash("rm -rf /", "rm -rf / --no-preserve-root"),
	}
	corrupt := gateagenttest.SnapshotFiles(t, sample, nil, "coding-agent-0")
	corrupt[gate.SnapshotFileName] = []byte(`{"apiVersion":`)

	for _, tc := range []struct {
		name      string
		files     map[string][]byte
		layers    bool
		workspace string
		calls     []gateagenttest.HookCall
	}{
		{"sample policy", gateagenttest.SnapshotFiles(t, sample, checked, "coding-agent-0"), false, "ws_123", append(cases, refusedBeforeRules...)},
		{"sample policy, no checked rules file", gateagenttest.SnapshotFiles(t, sample, nil, ""), false, "", cases[:20]},
		{"audit policy", gateagenttest.SnapshotFiles(t, audit, nil, "coding-agent-0"), false, "", everyday},
		{"layered bundle", layered, true, "", append(everyday, refusedBeforeRules[0])},
		{"layered bundle read without its layers", layered, false, "", everyday},
		{"layers asked of a bundle without an index", gateagenttest.SnapshotFiles(t, audit, nil, ""), true, "", everyday[:2]},
		{"another workspace", gateagenttest.SnapshotFiles(t, sample, checked, ""), false, "ws_999", everyday[:2]},
		{"corrupt snapshot", corrupt, false, "", append(everyday[:2], refusedBeforeRules[0])},
		{"no snapshot", map[string][]byte{gate.PodNameFile: []byte("coding-agent-0")}, false, "", everyday[:2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vol := gateagenttest.NewVolume(t, tc.files)
			r := start(t, Options{BundleDir: vol.Dir})
			for _, c := range tc.calls {
				for _, v := range []struct {
					token         string
					explicitAllow bool
				}{{"", false}, {token, false}, {"", true}, {token, true}} {
					req := agentproto.Request{Version: vol.Version(), Token: v.token, Workspace: tc.workspace,
						Flags: agentproto.Flags{Layers: tc.layers, ExplicitAllow: v.explicitAllow}, Input: c.Input}
					resp := r.ask(t, req)
					want := runGateHook(t, c.Input, gateHookArgs(vol.SnapshotPath(), req)...)
					if got := answerOf(resp); got != want {
						t.Errorf("%s (token %v, explicit allow %v):\nsidecar  %+v\ngate-hook %+v", c.Name, v.token != "", v.explicitAllow, got, want)
					}
					if resp.Version != vol.Version() {
						t.Errorf("%s: answered for version %q, the volume's is %q", c.Name, resp.Version, vol.Version())
					}
				}
			}
		})
	}
}

// TestAnswerCarriesWhatDecided: the answer names the digest it was decided with: the snapshot's,
// or the layer set's fingerprint; none for a bundle that does not load.
func TestAnswerCarriesWhatDecided(t *testing.T) {
	audit, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/audited", Generation: 1}, auditRules())
	if err != nil {
		t.Fatal(err)
	}
	vol := gateagenttest.NewVolume(t, gateagenttest.SnapshotFiles(t, audit, nil, ""))
	r := start(t, Options{BundleDir: vol.Dir})
	ls := gateagenttest.Payload("Bash", map[string]any{"command": "ls"})
	if resp := r.ask(t, agentproto.Request{Version: vol.Version(), Input: ls}); resp.Digest != audit.Digest {
		t.Errorf("digest %q, want the snapshot's %q", resp.Digest, audit.Digest)
	}
	layer := gateagenttest.NewClusterLayer(t, "baseline", 0, auditRules())
	lvol := gateagenttest.NewVolume(t, gateagenttest.LayeredFiles(t, audit, "p", "", layer))
	set, err := gate.LoadLayered(lvol.Dir, "")
	if err != nil {
		t.Fatal(err)
	}
	lr := start(t, Options{BundleDir: lvol.Dir})
	if resp := lr.ask(t, agentproto.Request{Version: lvol.Version(), Flags: agentproto.Flags{Layers: true}, Input: ls}); resp.Digest != set.Fingerprint() {
		t.Errorf("digest %q, want the layer set's fingerprint %q", resp.Digest, set.Fingerprint())
	}
	vol.Publish(map[string][]byte{"other": []byte("x")})
	if resp := r.ask(t, agentproto.Request{Version: vol.Version(), Input: ls}); resp.Digest != "" || resp.Exit != 2 {
		t.Errorf("a bundle without a snapshot: digest %q exit %d, want none and a refusal", resp.Digest, resp.Exit)
	}
}
