package gate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// callerFields is the caller as one string, field by field, so a table can say what a rule sees.
const callerFields = `caller.namespace + "|" + caller.policy + "|" + caller.serviceAccount + "|" + caller.pod + "|" + caller.agent + "|" + caller.session`

func mustCompile(t *testing.T, policy string, rules ...Rule) *Policy {
	t.Helper()
	s, err := BuildSnapshot(PolicyMeta{Policy: policy, Generation: 1}, rules)
	if err != nil {
		t.Fatal(err)
	}
	p, errs := Compile(s)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return p
}

// TestCallerPerSurface: each surface tells the rules what it knows of its caller, the gate adds
// the policy's namespace and name and the session, and what a surface does not know is "".
func TestCallerPerSurface(t *testing.T) {
	p := mustCompile(t, "agents/coding-agents")
	for _, tc := range []struct {
		name string
		call Call
		want string // namespace|policy|serviceAccount|pod|agent|session
	}{
		{"hook with its pod's name", Call{Surface: SurfaceHook, Session: "9b2c", Caller: Caller{Pod: "coding-agent-0"}},
			"agents|coding-agents||coding-agent-0||9b2c"},
		{"hook without the pod's files", Call{Surface: SurfaceHook, Session: "9b2c"},
			"agents|coding-agents||||9b2c"},
		{"api, authenticated", Call{Surface: SurfaceAPI, Caller: Caller{ServiceAccount: "agents/orchestrator"}},
			"agents|coding-agents|agents/orchestrator|||"},
		{"harness route, authenticated", Call{Surface: SurfaceHarness, Session: "s1", Caller: Caller{ServiceAccount: "tools/builder"}},
			"agents|coding-agents|tools/builder|||s1"},
		{"workflow route, no authentication", Call{Surface: SurfaceWorkflow},
			"agents|coding-agents||||"},
		{"managed agents", Call{Surface: SurfaceManagedAgents, Session: "sesn_1", Caller: Caller{Agent: "agent_01"}},
			"agents|coding-agents|||agent_01|sesn_1"},
		// The policy's namespace and name, and the session, are the gate's to tell: a surface
		// cannot claim another policy, namespace or session.
		{"surface's own namespace, policy and session ignored", Call{Surface: SurfaceAPI, Session: "real",
			Caller: Caller{Namespace: "kube-system", Policy: "other", Session: "claimed", ServiceAccount: "agents/orchestrator"}},
			"agents|coding-agents|agents/orchestrator|||real"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.call
			got, err := evalExpr(t, callerFields, &activation{policy: p, caller: &c.Caller, session: c.Session})
			if err != nil || got != tc.want {
				t.Fatalf("caller is %q (%v), want %q", got, err, tc.want)
			}
			// And through Decide, as the surfaces call it.
			q := mustCompile(t, "agents/coding-agents", Rule{Name: "who", When: callerFields + ` == "` + tc.want + `"`, Action: Block, Reason: "seen"})
			c.Tool = "Bash"
			if d := q.Decide(&c); d.Verdict != Block || d.Rule != "who" {
				t.Fatalf("Decide: %+v", d)
			}
		})
	}
}

// TestUnknownCallerIsEmpty: a rule on a field the surface does not fill sees "", and evaluates
// without error, so failurePolicy Fail does not turn an unknown identity into a refusal, and an
// identity-based exception simply does not apply.
func TestUnknownCallerIsEmpty(t *testing.T) {
	p := mustCompile(t, "agents/coding-agents",
		Rule{Name: "pods-start-with-ci", When: `caller.pod.startsWith("ci-") && caller.agent.size() == 0`, Action: Ask, Reason: "ci pods ask"},
		Rule{Name: "only-release", Tools: []string{"mcp__deploy__*"}, When: `caller.serviceAccount != caller.namespace + "/release"`, Action: Block, Reason: "deploys are the release ServiceAccount's"},
	)
	for _, tc := range []struct {
		call Call
		want Verdict
	}{
		{Call{Tool: "Bash", Surface: SurfaceHook}, Allow},
		{Call{Tool: "Bash", Surface: SurfaceHook, Caller: Caller{Pod: "ci-7"}}, Ask},
		{Call{Tool: "mcp__deploy__run", Surface: SurfaceManagedAgents, Caller: Caller{Agent: "agent_01"}}, Block},
		{Call{Tool: "mcp__deploy__run", Surface: SurfaceHook, Caller: Caller{Pod: "release"}}, Block},
		{Call{Tool: "mcp__deploy__run", Surface: SurfaceAPI, Caller: Caller{ServiceAccount: "other/release"}}, Block},
		{Call{Tool: "mcp__deploy__run", Surface: SurfaceAPI, Caller: Caller{ServiceAccount: "agents/release"}}, Allow},
	} {
		if d := p.Decide(&tc.call); d.Verdict != tc.want || d.Code == CodeRuleError {
			t.Errorf("%s on %s as %+v: %+v, want %s", tc.call.Tool, tc.call.Surface, tc.call.Caller, d, tc.want)
		}
	}
}

func TestCallerOfAPolicyWithoutNamespace(t *testing.T) {
	p := mustCompile(t, "standalone")
	got, err := evalExpr(t, callerFields, &activation{policy: p, caller: &Caller{}})
	if err != nil || got != "|standalone||||" {
		t.Fatalf("%q %v", got, err)
	}
	// Evaluated with no policy at all (a bare activation), every field is "".
	got, err = evalExpr(t, callerFields, &activation{})
	if err != nil || got != "|||||" {
		t.Fatalf("%q %v", got, err)
	}
}

// TestCallerFieldsAreChecked: a field the caller does not have is a compile error at the rule's
// field path, as a misspelt input field could never be.
func TestCallerFieldsAreChecked(t *testing.T) {
	errs := ValidateRules([]Rule{{Name: "typo", When: `caller.serviceaccount == "agents/x"`, Action: Block, Reason: "x"}})
	if len(errs) != 1 || errs[0].Field != "spec.rules[0].when" || !strings.Contains(errs[0].Message, "undefined field 'serviceaccount'") {
		t.Fatalf("%v", errs)
	}
}

func TestReadsCaller(t *testing.T) {
	g := New("")
	if g.ReadsCaller() {
		t.Fatal("a gate with no policy reads no caller")
	}
	for when, want := range map[string]bool{
		`input.command.contains("rm")`:                                false,
		`call.kind == "exec"`:                                         false,
		`caller.agent == "agent_01"`:                                  true,
		`call.commands.exists(c, c.name == "rm") || caller.pod == ""`: true,
		`[1].exists(caller, caller > 0)`:                              true, // a variable of that name errs on the side of a lookup
	} {
		g.Swap(mustCompile(t, "agents/p", Rule{Name: "r", When: when, Action: Block, Reason: "r"}))
		if got := g.ReadsCaller(); got != want {
			t.Errorf("%s: ReadsCaller %v, want %v", when, got, want)
		}
	}
	g.Swap(mustCompile(t, "agents/p", Rule{Name: "no-when", Action: Block, Reason: "r"}))
	if g.ReadsCaller() {
		t.Error("a rule with no when reads no caller")
	}
}

// TestPodCaller: the hook's pod name comes from the downward API file beside the snapshot, as
// the kubelet writes it (through its ..data symbolic links); anything else there is unknown.
func TestPodCaller(t *testing.T) {
	kubeletLayout := func(t *testing.T, name string) string {
		t.Helper()
		dir := t.TempDir()
		data := filepath.Join(dir, "..2026_12_01_00_00_00.000000001")
		if err := os.MkdirAll(filepath.Join(data, "pod"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, PodNameFile), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", "pod"), filepath.Join(dir, "pod")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	if got := PodCaller(kubeletLayout(t, "coding-agent-0")); got != (Caller{Pod: "coding-agent-0"}) {
		t.Fatalf("kubelet's layout: %+v", got)
	}
	if got := PodCaller(t.TempDir()); got != (Caller{}) {
		t.Fatalf("no file: %+v", got)
	}
	for _, content := range []string{
		"coding-agent-0\n", "Coding-Agent-0", "coding_agent", "-agent", "agent-", "a..b", "a.-b", "",
		"sandbox pod", strings.Repeat("a", 254), "coding-agent-0\x00",
	} {
		if got := PodCaller(kubeletLayout(t, content)); got != (Caller{}) {
			t.Errorf("%q: %+v, want no pod", content, got)
		}
	}
	if got := PodCaller(kubeletLayout(t, strings.Repeat("a", 253))); got.Pod == "" {
		t.Error("a 253-character name is a pod name")
	}
	if got := PodCaller(kubeletLayout(t, "sandbox-7f9c.agents")); got.Pod != "sandbox-7f9c.agents" {
		t.Errorf("a dotted name: %+v", got)
	}
	// A directory where the file should be is unknown too.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, PodNameFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := PodCaller(dir); got != (Caller{}) {
		t.Errorf("a directory: %+v", got)
	}
}
