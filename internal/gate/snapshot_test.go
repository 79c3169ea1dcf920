package gate_test

import (
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/golden"
)

func goldenRules() []gate.Rule {
	return []gate.Rule{
		{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.matches("rm\\s+-rf\\s+/")`, Action: gate.Block, Reason: "destructive command on the root filesystem", Code: "destructive_command"},
		{Name: "fetch-needs-human", Tools: []string{"web_fetch"}, When: `!input.url.startsWith("https://github.com/") && input.url != ""`, Action: gate.Ask, Reason: "fetching from outside github.com needs a human"},
		{Name: "no-prod-deploys", Tools: []string{"mcp__deploy__*"}, When: `has(input.environment) && input.environment == "production"`, Action: gate.Block, Reason: "production deploys go through the release pipeline", Code: "production_deploy"},
		{Name: "reads-ok", Tools: []string{"read", "glob", "grep"}, Action: gate.Allow},
	}
}

func TestSnapshotGolden(t *testing.T) {
	meta := gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 3, WorkspaceID: "ws_123", DefaultAction: gate.Allow, FailurePolicy: gate.Fail}
	s, err := gate.BuildSnapshot(meta, goldenRules())
	if err != nil {
		t.Fatal(err)
	}
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "snapshot.golden.rules", data)
	if _, err := gate.LoadSnapshot(data, "ws_123"); err != nil {
		t.Fatalf("the golden snapshot does not verify: %v", err)
	}

	empty, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/empty", Generation: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ = empty.Encode()
	golden.Check(t, "snapshot-empty.golden.rules", data)

	invalid, err := gate.BuildInvalidSnapshot(gate.PolicyMeta{Policy: "agents/broken", Generation: 1}, "spec.rules[0].when: undeclared reference to 'inptu'")
	if err != nil {
		t.Fatal(err)
	}
	data, _ = invalid.Encode()
	golden.Check(t, "snapshot-invalid.golden.rules", data)
}

func TestSnapshotDigest(t *testing.T) {
	meta := gate.PolicyMeta{Policy: "agents/p", Generation: 1, WorkspaceID: "ws", DefaultAction: gate.Allow, FailurePolicy: gate.Fail}
	base, err := gate.BuildSnapshot(meta, goldenRules())
	if err != nil {
		t.Fatal(err)
	}
	again, _ := gate.BuildSnapshot(meta, goldenRules())
	if base.Digest != again.Digest {
		t.Fatalf("the same input gave two digests: %s, %s", base.Digest, again.Digest)
	}
	changes := map[string]func(*gate.PolicyMeta, []gate.Rule){
		"policy":        func(m *gate.PolicyMeta, _ []gate.Rule) { m.Policy = "agents/q" },
		"generation":    func(m *gate.PolicyMeta, _ []gate.Rule) { m.Generation = 2 },
		"workspace":     func(m *gate.PolicyMeta, _ []gate.Rule) { m.WorkspaceID = "ws2" },
		"defaultAction": func(m *gate.PolicyMeta, _ []gate.Rule) { m.DefaultAction = gate.Block },
		"failurePolicy": func(m *gate.PolicyMeta, _ []gate.Rule) { m.FailurePolicy = gate.Ignore },
		"rule reason":   func(_ *gate.PolicyMeta, r []gate.Rule) { r[0].Reason = "other" },
		"rule when":     func(_ *gate.PolicyMeta, r []gate.Rule) { r[0].When = `input.command == "x"` },
		"rule order":    func(_ *gate.PolicyMeta, r []gate.Rule) { r[0], r[1] = r[1], r[0] },
		"rule tools":    func(_ *gate.PolicyMeta, r []gate.Rule) { r[3].Tools = []string{"read"} },
	}
	for name, change := range changes {
		m, rules := meta, goldenRules()
		change(&m, rules)
		s, err := gate.BuildSnapshot(m, rules)
		if err != nil {
			t.Fatal(err)
		}
		if s.Digest == base.Digest {
			t.Errorf("changing the %s left the digest unchanged", name)
		}
	}
}
