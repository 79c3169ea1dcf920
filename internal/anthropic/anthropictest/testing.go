package anthropictest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/intutic/gate-operator/internal/anthropic"
)

// Key is the API key Start's fake accepts and Client's key file holds.
const Key = "sk-ant-fake-key"

// Start starts a fake that accepts Key, over HTTP/2 and TLS as the real API, closed when the
// test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := NewTLS(Key)
	t.Cleanup(s.Close)
	return s
}

// Client is a Sessions API client of s, its key in a file as the confirmer reads it, trusting
// s's certificate, retrying without waiting.
func (s *Server) Client(t testing.TB) *anthropic.Client {
	t.Helper()
	key := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(key, []byte(Key), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := anthropic.NewClient(anthropic.ClientOptions{BaseURL: s.URL, APIKeyFile: key, RootCAs: s.CertPool(),
		Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
