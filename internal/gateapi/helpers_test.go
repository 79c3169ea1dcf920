package gateapi

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/confirm"
	"github.com/intutic/gate-operator/internal/gate"
)

const fakeKey = "sk-ant-fake-key"

// testGate blocks rm -rf / and sends deploys to a human.
func testGate(t testing.TB) *gate.Gate {
	t.Helper()
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1}, []gate.Rule{
		{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.matches("rm\\s+-rf\\s+/")`, Action: gate.Block, Reason: "destructive command on the root filesystem", Code: "destructive_command"},
		{Name: "deploys-need-human", Tools: []string{"mcp__deploy__*"}, Action: gate.Ask, Reason: "deploys need a human"},
	})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := s.Encode()
	g := gate.New("")
	if err := g.Load(data); err != nil {
		t.Fatal(err)
	}
	return g
}

// newConfirmer is the confirmer behind the webhook queue, on the fake Sessions API.
func newConfirmer(t testing.TB, fake *anthropictest.Server) *confirm.Confirmer {
	t.Helper()
	key := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(key, []byte(fakeKey), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := anthropic.NewClient(anthropic.ClientOptions{BaseURL: fake.URL, APIKeyFile: key,
		Sleep: func(context.Context, time.Duration) error { return nil }}) // retries without waiting
	if err != nil {
		t.Fatal(err)
	}
	return &confirm.Confirmer{Client: c, Gate: testGate(t), Deadline: 15 * time.Minute, Log: logr.Discard()}
}

func newFake(t testing.TB) *anthropictest.Server {
	t.Helper()
	f := anthropictest.New(fakeKey)
	t.Cleanup(f.Close)
	return f
}
