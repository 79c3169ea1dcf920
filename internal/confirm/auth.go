package confirm

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TokenReviewer reviews a bearer token; client-go's TokenReviews client satisfies it.
type TokenReviewer interface {
	Create(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// Authenticator admits callers of the gate HTTP API by their ServiceAccount token: the token
// is checked with a TokenReview and the ServiceAccount must be on the allow-list
// (namespace/name or namespace/*). Positive reviews are cached for CacheTTL, keyed by the
// token's hash, never the token itself.
type Authenticator struct {
	Reviewer TokenReviewer
	Allowed  []string
	CacheTTL time.Duration

	mu    sync.Mutex
	cache map[[32]byte]authEntry
}

type authEntry struct {
	sa      string
	expires time.Time
}

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

// Authenticate returns the caller's ServiceAccount as namespace/name.
func (a *Authenticator) Authenticate(r *http.Request) (string, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return "", errUnauthenticated
	}
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	a.mu.Lock()
	if e, ok := a.cache[key]; ok && now.Before(e.expires) {
		a.mu.Unlock()
		return e.sa, nil
	}
	a.mu.Unlock()

	res, err := a.Reviewer.Create(r.Context(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("reviewing the token: %w", err)
	}
	if !res.Status.Authenticated {
		return "", errInvalidToken
	}
	rest, ok := strings.CutPrefix(res.Status.User.Username, "system:serviceaccount:")
	if !ok {
		return "", fmt.Errorf("%w: %s is not a ServiceAccount", errForbidden, res.Status.User.Username)
	}
	ns, name, _ := strings.Cut(rest, ":")
	sa := ns + "/" + name
	if !a.allowed(ns, name) {
		return "", fmt.Errorf("%w: ServiceAccount %s may not call the gate API", errForbidden, sa)
	}
	ttl := a.CacheTTL
	if ttl == 0 {
		ttl = time.Minute
	}
	a.mu.Lock()
	if a.cache == nil || len(a.cache) > 10_000 {
		a.cache = map[[32]byte]authEntry{}
	}
	a.cache[key] = authEntry{sa: sa, expires: now.Add(ttl)}
	a.mu.Unlock()
	return sa, nil
}

func (a *Authenticator) allowed(ns, name string) bool {
	for _, e := range a.Allowed {
		if e == ns+"/"+name || e == ns+"/*" {
			return true
		}
	}
	return false
}
