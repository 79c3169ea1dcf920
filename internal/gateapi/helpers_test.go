package gateapi

import (
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/confirm"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

// newConfirmer is the confirmer behind the webhook queue, on the fake Sessions API.
func newConfirmer(t testing.TB, fake *anthropictest.Server) *confirm.Confirmer {
	t.Helper()
	return &confirm.Confirmer{Client: fake.Client(t), Gate: gatetest.CodingAgents(t), Deadline: 15 * time.Minute, Log: logr.Discard()}
}

func newFake(t testing.TB) *anthropictest.Server { return anthropictest.Start(t) }
