package gateapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

type reviewerFunc func(context.Context, *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error)

func (f reviewerFunc) Create(ctx context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	return f(ctx, tr)
}

// logSink collects what the API logs.
type logSink struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *logSink) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.b.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{})
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func fetch(t *testing.T, srv *httptest.Server, method, path, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// TestReviewFailureIsNotShown: when the TokenReview fails, the unauthenticated caller gets a
// 503 with a generic message; the API server's URL goes to the log only.
func TestReviewFailureIsNotShown(t *testing.T) {
	const detail = `Post "https://10.96.0.1:443/apis/authentication.k8s.io/v1/tokenreviews": dial tcp 10.96.0.1:443: connect: connection refused`
	var logs logSink
	api := &API{Gate: gatetest.CodingAgents(t), Log: logs.logger(), Auth: &Authenticator{
		Reviewer: reviewerFunc(func(context.Context, *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
			return nil, errors.New(detail)
		}),
		Allowed: []string{"agents/orchestrator"},
	}}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	status, body := fetch(t, srv, "POST", "/v1/guard", "some-token", `{"tool":"read"}`)
	if status != http.StatusServiceUnavailable {
		t.Fatalf("%d %s, want 503", status, body)
	}
	for _, leak := range []string{"10.96.0.1", "tokenreviews", "connection refused", "some-token"} {
		if strings.Contains(body, leak) {
			t.Errorf("the response carries %q: %s", leak, body)
		}
	}
	if !strings.Contains(logs.String(), "10.96.0.1:443") || !strings.Contains(logs.String(), "/v1/guard") {
		t.Errorf("the failure is not logged with the request:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "some-token") {
		t.Errorf("the log carries the token:\n%s", logs.String())
	}
}

// TestGateFailureDetailIsNotShown: a snapshot that cannot be loaded is reported by its code,
// on /readyz (unauthenticated) and in the decisions of authenticated callers, never with the
// path of the file or the error of the file system.
func TestGateFailureDetailIsNotShown(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "secret-dir", gate.SnapshotFileName)
	g := gate.New("")
	_ = g.LoadFile(missing)
	srv := httptest.NewServer((&API{Gate: g, Log: logr.Discard()}).Handler())
	defer srv.Close()
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/readyz", ""},
		{"POST", "/v1/guard", `{"tool":"read"}`},
		{"POST", "/v1/workflow/needs-approval", `{"toolName":"read"}`},
		{"POST", "/v1/harness/approvals", `{"pendingApprovals":[{"approvalId":"a","toolCallId":"a","toolName":"read","input":"{}"}]}`},
	} {
		status, body := fetch(t, srv, c.method, c.path, "", c.body)
		if strings.Contains(body, "secret-dir") || !strings.Contains(body, gate.CodeSnapshotMissing) && c.path != "/v1/harness/approvals" {
			t.Errorf("%s %s: %d %s", c.method, c.path, status, body)
		}
	}
}
