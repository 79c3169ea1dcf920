package gateapi

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/intutic/gate-operator/internal/decisionlog"
)

// TokenReviewer reviews a bearer token; client-go's TokenReviews client satisfies it.
type TokenReviewer interface {
	Create(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// Authenticator admits callers of the gate HTTP API by their ServiceAccount token: the token
// is checked with a TokenReview for the confirmer's audience and the ServiceAccount must be on
// the allow-list (namespace/name or namespace/*).
//
// The token must be a projected one bound to Audience: the review asks for that audience and
// a token the API server does not say is for it is refused, as a pod's default token (whose
// audience is the API server) is. A caller therefore never hands the confirmer a token the
// API server would take from it.
//
// Every unknown token costs the API server a review, so reviews are rationed: a token that
// reviewed as authenticated is trusted for CacheTTL, one that did not is refused for
// NegativeCacheTTL without another review, and concurrent requests with the same token share
// one review. Caches and in-flight reviews are keyed by the token's SHA-256, never the token.
// A review that failed (the API server did not answer) is not cached: the next request
// retries it.
type Authenticator struct {
	Reviewer TokenReviewer
	Allowed  []string
	// Audience is the audience callers' tokens must be bound to; default DefaultTokenAudience.
	Audience string
	// CacheTTL is how long an authenticated token is trusted; default DefaultAuthCacheTTL.
	CacheTTL time.Duration
	// NegativeCacheTTL is how long a token that did not authenticate is refused without a
	// review; default DefaultAuthNegativeCacheTTL.
	NegativeCacheTTL time.Duration
	// ReviewTimeout bounds one TokenReview; default DefaultReviewTimeout.
	ReviewTimeout time.Duration
	// Clock drives the cache TTLs; nil is the real clock.
	Clock clock.PassiveClock

	init          sync.Once
	authenticated *cache.LRUExpireCache // token hash -> username
	rejected      *cache.LRUExpireCache // token hash -> struct{}
	reviews       singleflight.Group    // keyed by the token hash
}

// Defaults of the Authenticator.
const (
	// DefaultTokenAudience is the audience of a confirmer run without --token-audience; the
	// SessionConfirmer controller gives each confirmer its own (TokenAudience).
	DefaultTokenAudience = "gate.intutic.io/confirmer"
	// DefaultAuthCacheTTL: a revoked token stops working within a minute, while a caller
	// making a call per tool use costs one review a minute.
	DefaultAuthCacheTTL = time.Minute
	// DefaultAuthNegativeCacheTTL: long enough that repeating a bogus token costs at most one
	// review per 10 s, short enough that nothing a caller fixes stays refused for long.
	DefaultAuthNegativeCacheTTL = 10 * time.Second
	// DefaultReviewTimeout: TokenReview is answered in milliseconds; beyond 10 s the API
	// server is in trouble and the caller gets a 503 to retry.
	DefaultReviewTimeout = 10 * time.Second
	// maxCachedTokens bounds each cache; the least recently used entry goes first, and a flood
	// of bogus tokens cannot evict authenticated ones (they are kept apart).
	maxCachedTokens = 10_000
)

// ValidateAllowList checks allow-list entries: namespace/name or namespace/*.
func ValidateAllowList(entries []string) error {
	for _, e := range entries {
		ns, name, ok := strings.Cut(e, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || (name != "*" && len(validation.IsDNS1123Subdomain(name)) > 0) {
			return fmt.Errorf("allowed service account %q is not namespace/name or namespace/*", e)
		}
	}
	return nil
}

// Authentication outcomes, mapped to HTTP statuses by authStatus.
var (
	errUnauthenticated = errors.New("a ServiceAccount bearer token is required")
	errInvalidToken    = errors.New("the token is not valid")
	errForbidden       = errors.New("forbidden")
)

// authStatus is 401 for a missing or invalid token, 403 for a caller not on the allow-list,
// and 503 when the token could not be reviewed (the caller may retry; nothing is allowed).
func authStatus(err error) int {
	switch {
	case errors.Is(err, errUnauthenticated), errors.Is(err, errInvalidToken):
		return http.StatusUnauthorized
	case errors.Is(err, errForbidden):
		return http.StatusForbidden
	default:
		return http.StatusServiceUnavailable
	}
}

// Caller is an authenticated caller: its ServiceAccount as namespace/name and, when its token
// is bound to a pod (a projected token is), that pod as the TokenReview named it.
type Caller struct {
	ServiceAccount  string
	PodName, PodUID string
}

// insecureCaller names the caller of a request under --insecure-no-auth in decision records.
const insecureCaller = "insecure-no-auth"

// origin is where the caller's decisions come from, for their records: its ServiceAccount, or
// insecureCaller when nobody was authenticated.
func (c Caller) origin() decisionlog.Origin {
	if c.ServiceAccount == "" {
		return decisionlog.Origin{Caller: insecureCaller}
	}
	return decisionlog.Origin{Caller: c.ServiceAccount}
}

// The TokenReview's user.extra keys of the pod a token is bound to.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// reviewed is what a review of an authenticated token is cached as.
type reviewed struct{ username, podName, podUID string }

// Authenticate returns the caller's ServiceAccount as namespace/name.
func (a *Authenticator) Authenticate(r *http.Request) (string, error) {
	c, err := a.AuthenticateCaller(r)
	return c.ServiceAccount, err
}

// AuthenticateCaller returns the caller: its ServiceAccount and the pod its token is bound to.
func (a *Authenticator) AuthenticateCaller(r *http.Request) (Caller, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return Caller{}, errUnauthenticated
	}
	a.init.Do(func() {
		var clk cache.Clock = clock.RealClock{}
		if a.Clock != nil {
			clk = a.Clock
		}
		a.authenticated = cache.NewLRUExpireCacheWithClock(maxCachedTokens, clk)
		a.rejected = cache.NewLRUExpireCacheWithClock(maxCachedTokens, clk)
	})
	key := sha256.Sum256([]byte(token))
	if user, ok := a.authenticated.Get(key); ok {
		return a.admit(user.(reviewed))
	}
	if _, ok := a.rejected.Get(key); ok {
		return Caller{}, errInvalidToken
	}
	// The review outlives a caller that goes away, since others may be waiting on it.
	rctx := context.WithoutCancel(r.Context())
	ch := a.reviews.DoChan(string(key[:]), func() (any, error) { return a.review(rctx, key, token) })
	select {
	case res := <-ch:
		if res.Err != nil {
			return Caller{}, res.Err
		}
		if user := res.Val.(reviewed); user.username != "" {
			return a.admit(user)
		}
		return Caller{}, errInvalidToken
	case <-r.Context().Done():
		return Caller{}, fmt.Errorf("waiting for the token review: %w", r.Context().Err())
	}
}

// review makes one TokenReview and caches its outcome: the user, or none when the token did
// not authenticate.
func (a *Authenticator) review(ctx context.Context, key [32]byte, token string) (reviewed, error) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(a.ReviewTimeout, DefaultReviewTimeout))
	defer cancel()
	audience := a.Audience
	if audience == "" {
		audience = DefaultTokenAudience
	}
	res, err := a.Reviewer.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}, metav1.CreateOptions{})
	if err != nil {
		return reviewed{}, fmt.Errorf("reviewing the token: %w", err)
	}
	// An authenticated review whose status names no audience means the token is valid for the
	// API server's audience (a reviewer that ignored spec.audiences answers the same way): it
	// is refused like one that names another.
	if !res.Status.Authenticated || res.Status.User.Username == "" || !slices.Contains(res.Status.Audiences, audience) {
		a.rejected.Add(key, struct{}{}, orDefault(a.NegativeCacheTTL, DefaultAuthNegativeCacheTTL))
		return reviewed{}, nil
	}
	u := res.Status.User
	user := reviewed{username: u.Username, podName: single(u.Extra[extraPodName]), podUID: single(u.Extra[extraPodUID])}
	a.authenticated.Add(key, user, orDefault(a.CacheTTL, DefaultAuthCacheTTL))
	return user, nil
}

// single is the one value of a user.extra key, or "" when it has none or several.
func single(v authenticationv1.ExtraValue) string {
	if len(v) != 1 {
		return ""
	}
	return v[0]
}

// admit maps an authenticated user to its caller if it is an allowed ServiceAccount.
func (a *Authenticator) admit(user reviewed) (Caller, error) {
	rest, ok := strings.CutPrefix(user.username, "system:serviceaccount:")
	if !ok {
		return Caller{}, fmt.Errorf("%w: %s is not a ServiceAccount", errForbidden, user.username)
	}
	ns, name, _ := strings.Cut(rest, ":")
	sa := ns + "/" + name
	if !a.allowed(ns, name) {
		return Caller{}, fmt.Errorf("%w: ServiceAccount %s may not call the gate API", errForbidden, sa)
	}
	c := Caller{ServiceAccount: sa}
	if user.podName != "" && user.podUID != "" {
		c.PodName, c.PodUID = user.podName, user.podUID
	}
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (a *Authenticator) allowed(ns, name string) bool {
	for _, e := range a.Allowed {
		if e == ns+"/"+name || e == ns+"/*" {
			return true
		}
	}
	return false
}
