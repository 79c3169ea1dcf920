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
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

const fakeKey = "sk-ant-fake-key"

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
	return &confirm.Confirmer{Client: c, Gate: gatetest.CodingAgents(t), Deadline: 15 * time.Minute, Log: logr.Discard()}
}

func newFake(t testing.TB) *anthropictest.Server {
	t.Helper()
	f := anthropictest.New(fakeKey)
	t.Cleanup(f.Close)
	return f
}
