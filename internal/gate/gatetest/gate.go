package gatetest

import (
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
)

// Gate is a gate with a verified snapshot of rules loaded, as the confirmer runs one.
func Gate(t testing.TB, rules ...gate.Rule) *gate.Gate {
	t.Helper()
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1}, rules)
	if err != nil {
		t.Fatal(err)
	}
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New("")
	if err := g.Load(data); err != nil {
		t.Fatal(err)
	}
	return g
}

// CodingAgents is the confirmer tests' gate: it blocks rm -rf / and sends deploys to a human.
func CodingAgents(t testing.TB) *gate.Gate {
	return Gate(t,
		gate.Rule{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.matches("rm\\s+-rf\\s+/")`, Action: gate.Block, Reason: "destructive command on the root filesystem", Code: "destructive_command"},
		gate.Rule{Name: "deploys-need-human", Tools: []string{"mcp__deploy__*"}, Action: gate.Ask, Reason: "deploys need a human"},
	)
}

// NoEtcWrites blocks writes under /etc; any other call is allowed.
func NoEtcWrites(t testing.TB) *gate.Gate {
	return Gate(t, gate.Rule{Name: "no-etc-writes", Tools: []string{"write"}, When: `has(input.file_path) && input.file_path.startsWith("/etc/")`, Action: gate.Block, Reason: "no writes under /etc"})
}
