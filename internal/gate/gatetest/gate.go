package gatetest

import (
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
)

// Gate is a gate with a verified snapshot of rules loaded, as the confirmer runs one.
func Gate(t testing.TB, rules ...gate.Rule) *gate.Gate {
	t.Helper()
	return GateWith(t, gate.PolicyMeta{}, rules...)
}

// GateWith is Gate for a policy with meta (its name defaults to agents/coding-agents).
func GateWith(t testing.TB, meta gate.PolicyMeta, rules ...gate.Rule) *gate.Gate {
	t.Helper()
	if meta.Policy == "" {
		meta.Policy, meta.Generation = "agents/coding-agents", 1
	}
	s, err := gate.BuildSnapshot(meta, rules)
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
	return GateWith(t, gate.PolicyMeta{}, codingAgents()...)
}

// AuditedCodingAgents is CodingAgents in a policy set to Audit: rm -rf / would be blocked and
// deploys would go to a human, and every call proceeds.
func AuditedCodingAgents(t testing.TB) *gate.Gate {
	return GateWith(t, gate.PolicyMeta{Enforcement: gate.Audit}, codingAgents()...)
}

func codingAgents() []gate.Rule {
	return []gate.Rule{
		{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.matches("rm\\s+-rf\\s+/")`, Action: gate.Block, Reason: "destructive command on the root filesystem", Code: "destructive_command"},
		{Name: "deploys-need-human", Tools: []string{"mcp__deploy__*"}, Action: gate.Ask, Reason: "deploys need a human"},
	}
}

// NoEtcWrites blocks writes under /etc; any other call is allowed.
func NoEtcWrites(t testing.TB) *gate.Gate {
	return Gate(t, gate.Rule{Name: "no-etc-writes", Tools: []string{"write"}, When: `has(input.file_path) && input.file_path.startsWith("/etc/")`, Action: gate.Block, Reason: "no writes under /etc"})
}

// Layered is CodingAgents under a cluster baseline, as a layered bundle carries them and the
// confirmer loads them (no pod: every layer applies): the cluster policy "baseline" (its pod
// selector ignored) blocks curl, and the namespace policy decides the rest.
func Layered(t testing.TB) *gate.Gate {
	t.Helper()
	primary, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1}, codingAgents())
	if err != nil {
		t.Fatal(err)
	}
	baseline, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "baseline", Generation: 1}, []gate.Rule{
		{Name: "no-curl", Tools: []string{"Bash"}, When: `input.command.startsWith("curl")`, Action: gate.Block, Reason: "the platform forbids curl", Code: "platform_curl"},
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := gate.BuildLayersIndex(gate.LayersIndex{Namespace: "agents", Namespaced: true, Layers: []gate.Layer{{
		Kind: gate.LayerKindCluster, Name: "baseline", Priority: 10, File: gate.ClusterLayerFile("baseline"), Digest: baseline.Digest,
		PodSelector: []gate.Requirement{{Key: "tier", Operator: gate.OperatorIn, Values: []string{"untrusted"}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := gate.LoadLayersIndex(raw, "")
	if err != nil {
		t.Fatal(err)
	}
	set, err := gate.NewLayerSetNoPod(idx, primary, map[string]*gate.Snapshot{"baseline": baseline})
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New("")
	g.SwapLayered(set.Compile())
	return g
}
