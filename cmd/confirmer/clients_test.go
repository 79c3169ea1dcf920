package main

import (
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// TestReviewClientIsSeparate: TokenReviews go through a client of their own, with their own
// rate limit, so a flood of reviews cannot delay the leader-election Lease renewals.
func TestReviewClientIsSeparate(t *testing.T) {
	shared := flowcontrol.NewTokenBucketRateLimiter(5, 10)
	cfg := &rest.Config{Host: "https://10.96.0.1:443", QPS: 5, Burst: 10, RateLimiter: shared}
	leases, reviews, err := kubeClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rl := reviews.AuthenticationV1().RESTClient().GetRateLimiter()
	ll := leases.CoordinationV1().RESTClient().GetRateLimiter()
	if rl == ll || rl == shared {
		t.Fatal("TokenReviews share the leader election's rate limiter")
	}
	if rl.QPS() != tokenReviewQPS {
		t.Errorf("TokenReview QPS %v, want %v", rl.QPS(), tokenReviewQPS)
	}
	if ll != shared || cfg.QPS != 5 || cfg.Burst != 10 {
		t.Errorf("the leader election's client changed: %+v", cfg)
	}
}
