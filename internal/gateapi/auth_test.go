package gateapi

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// recordingReviewer counts the reviews made per token. Valid tokens are answered at once;
// every other review waits for hold to close, as a slow or saturated API server would.
type recordingReviewer struct {
	valid map[string]string
	hold  chan struct{}

	mu      sync.Mutex
	reviews map[string]int
}

func (r *recordingReviewer) Create(_ context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	r.mu.Lock()
	r.reviews[tr.Spec.Token]++
	r.mu.Unlock()
	out := tr.DeepCopy()
	if user, ok := r.valid[tr.Spec.Token]; ok {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences, User: authenticationv1.UserInfo{Username: user}}
		return out, nil
	}
	<-r.hold
	return out, nil
}

func (r *recordingReviewer) counts() (map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out, total := map[string]int{}, 0
	for k, v := range r.reviews {
		out[k] = v
		total += v
	}
	return out, total
}

func authenticate(a *Authenticator, token string) (string, error) {
	r := httptest.NewRequest("POST", "/v1/guard", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return a.Authenticate(r)
}

// TestTokenReviewFlood: concurrent callers with bogus tokens cost one review per distinct
// token, also after they were refused, and a legitimate caller's review is not queued behind
// theirs.
func TestTokenReviewFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rev := &recordingReviewer{
			valid:   map[string]string{"legit": "system:serviceaccount:agents:orchestrator"},
			hold:    make(chan struct{}),
			reviews: map[string]int{},
		}
		release := sync.OnceFunc(func() { close(rev.hold) })
		defer release() // also when an assertion fails, so the bubble's goroutines can end
		clk := testingclock.NewFakeClock(time.Now())
		a := &Authenticator{Reviewer: rev, Allowed: []string{"agents/orchestrator"}, Clock: clk}
		const clients, distinct = 50, 5
		flood := func() *sync.WaitGroup {
			var wg sync.WaitGroup
			for i := range clients {
				wg.Go(func() {
					if _, err := authenticate(a, fmt.Sprintf("bogus-%d", i%distinct)); authStatus(err) != 401 {
						t.Errorf("bogus token: %v, want 401", err)
					}
				})
			}
			return &wg
		}

		wg := flood()
		synctest.Wait() // every bogus caller is waiting on a review
		if got, total := rev.counts(); total != distinct {
			t.Fatalf("%d reviews in flight for %d distinct tokens: %v", total, distinct, got)
		}
		if sa, err := authenticate(a, "legit"); err != nil || sa != "agents/orchestrator" {
			t.Fatalf("legitimate caller during the flood: %q %v", sa, err)
		}
		release()
		wg.Wait()

		// Within the TTL, refused tokens and the admitted one are answered from the cache.
		flood().Wait()
		if sa, err := authenticate(a, "legit"); err != nil || sa != "agents/orchestrator" {
			t.Fatalf("legitimate caller after the flood: %q %v", sa, err)
		}
		got, total := rev.counts()
		if total != distinct+1 || got["legit"] != 1 {
			t.Fatalf("%d reviews, want one per distinct token (%d): %v", total, distinct+1, got)
		}

		// Past the negative TTL a bogus token is reviewed again, once; the admitted token is
		// still trusted until its own TTL ends.
		clk.Step(DefaultAuthNegativeCacheTTL + time.Second)
		flood().Wait()
		if sa, err := authenticate(a, "legit"); err != nil || sa != "agents/orchestrator" {
			t.Fatalf("legitimate caller after the negative TTL: %q %v", sa, err)
		}
		if got, total := rev.counts(); total != 2*distinct+1 || got["legit"] != 1 {
			t.Fatalf("after the negative TTL: %v", got)
		}
		clk.Step(DefaultAuthCacheTTL)
		if sa, err := authenticate(a, "legit"); err != nil || sa != "agents/orchestrator" {
			t.Fatalf("legitimate caller after the TTL: %q %v", sa, err)
		}
		if got, _ := rev.counts(); got["legit"] != 2 {
			t.Fatalf("after the TTL: %v", got)
		}
	})
}

// TestFailedReviewIsRetried: a review that failed is not remembered as a refusal; the next
// request with the token reviews it again.
func TestFailedReviewIsRetried(t *testing.T) {
	calls := 0
	a := &Authenticator{Allowed: []string{"agents/orchestrator"}, Reviewer: reviewerFunc(func(_ context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
		if calls++; calls == 1 {
			return nil, errors.New("the API server is unreachable")
		}
		out := tr.DeepCopy()
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences, User: authenticationv1.UserInfo{Username: "system:serviceaccount:agents:orchestrator"}}
		return out, nil
	})}
	if _, err := authenticate(a, "t"); authStatus(err) != 503 {
		t.Fatalf("failed review: %v, want a 503", err)
	}
	if sa, err := authenticate(a, "t"); err != nil || sa != "agents/orchestrator" || calls != 2 {
		t.Fatalf("retry: %q %v after %d reviews", sa, err, calls)
	}
}

// TestTokenAudienceIsRequired: the review asks for the confirmer's audience, and a token the
// API server authenticates for another audience (its own, as a pod's default token has, or
// none said) is refused: a caller never hands the confirmer a token the API server takes.
func TestTokenAudienceIsRequired(t *testing.T) {
	const sa = "system:serviceaccount:agents:orchestrator"
	for name, c := range map[string]struct {
		audience  string   // the Authenticator's; "" is the default
		audiences []string // what the review answers
		ok        bool
	}{
		"the confirmer's audience":     {"", []string{DefaultTokenAudience}, true},
		"a set audience":               {"gate.intutic.io/confirmer/agents/coding-agents", []string{"gate.intutic.io/confirmer/agents/coding-agents"}, true},
		"no audience said":             {"", nil, false},
		"the API server's audience":    {"", []string{"https://kubernetes.default.svc.cluster.local"}, false},
		"another confirmer's audience": {"gate.intutic.io/confirmer/agents/a", []string{"gate.intutic.io/confirmer/agents/b"}, false},
		"the default, not the set one": {"gate.intutic.io/confirmer/agents/a", []string{DefaultTokenAudience}, false},
	} {
		t.Run(name, func(t *testing.T) {
			want := c.audience
			if want == "" {
				want = DefaultTokenAudience
			}
			var asked []string
			a := &Authenticator{Audience: c.audience, Allowed: []string{"agents/orchestrator"}, Reviewer: reviewerFunc(func(_ context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
				asked = tr.Spec.Audiences
				out := tr.DeepCopy()
				out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: c.audiences, User: authenticationv1.UserInfo{Username: sa}}
				return out, nil
			})}
			got, err := authenticate(a, "secret-token")
			if len(asked) != 1 || asked[0] != want {
				t.Errorf("the review asked for audiences %q, want [%s]", asked, want)
			}
			if c.ok {
				if err != nil || got != "agents/orchestrator" {
					t.Fatalf("authenticate: %q %v", got, err)
				}
				return
			}
			if authStatus(err) != 401 {
				t.Fatalf("authenticate: %q %v, want a 401", got, err)
			}
			if strings.Contains(err.Error(), "secret-token") {
				t.Fatalf("the error shows the token: %v", err)
			}
		})
	}
}
