package anthropic

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Standard Webhooks verification as the standardwebhooks package implements it (specs §7.2).

// WebhookTolerance is how far a webhook-timestamp may lie in the past or the future.
const WebhookTolerance = 300 * time.Second

// maxSeenWebhooks bounds the replay memory; ids older than the tolerance are forgotten anyway,
// since their timestamps no longer verify.
const maxSeenWebhooks = 100_000

// Webhook verification errors. None of them carries the key or the expected signature.
var (
	ErrWebhookHeaders   = errors.New("webhook: missing required headers")
	ErrWebhookTimestamp = errors.New("webhook: invalid signature headers")
	ErrWebhookTooOld    = errors.New("webhook: message timestamp too old")
	ErrWebhookTooNew    = errors.New("webhook: message timestamp too new")
	ErrWebhookSignature = errors.New("webhook: no matching signature found")
	ErrWebhookReplayed  = errors.New("webhook: webhook-id already seen")
)

// WebhookVerifier verifies Standard Webhooks signatures and remembers the ids it accepted, so
// a replay is recognised. It is safe for concurrent use.
type WebhookVerifier struct {
	key []byte
	now func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // webhook-id -> when it stops mattering
}

// NewWebhookVerifier decodes a signing secret: an optional whsec_ prefix, then standard base64
// (the +/ alphabet; padding optional, at most two '='; at least 4 characters; non-empty key).
func NewWebhookVerifier(secret string) (*WebhookVerifier, error) {
	key, err := decodeWebhookKey(secret)
	if err != nil {
		return nil, err
	}
	return &WebhookVerifier{key: key, now: time.Now, seen: map[string]time.Time{}}, nil
}

func decodeWebhookKey(secret string) ([]byte, error) {
	s := strings.TrimPrefix(strings.TrimSpace(secret), "whsec_")
	if len(s) < 4 {
		return nil, errors.New("webhook signing key: too short to be base64")
	}
	trimmed := strings.TrimRight(s, "=")
	if len(s)-len(trimmed) > 2 {
		return nil, errors.New("webhook signing key: too much base64 padding")
	}
	key, err := base64.RawStdEncoding.DecodeString(trimmed)
	if err != nil {
		return nil, errors.New("webhook signing key: not standard base64")
	}
	if len(key) == 0 {
		return nil, errors.New("webhook signing key: empty")
	}
	return key, nil
}

// Verify checks the webhook-id, webhook-timestamp and webhook-signature headers against the
// exact body bytes. An id already accepted returns ErrWebhookReplayed after the signature
// checks out, so the caller can acknowledge it without acting twice.
func (v *WebhookVerifier) Verify(h http.Header, body []byte) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return ErrWebhookHeaders
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrWebhookTimestamp
	}
	now := v.now()
	sent := time.Unix(secs, 0)
	switch {
	case now.Sub(sent) > WebhookTolerance:
		return ErrWebhookTooOld
	case sent.Sub(now) > WebhookTolerance:
		return ErrWebhookTooNew
	}
	want := []byte(v.sign(id, secs, body))
	matched := false
	for _, entry := range strings.Split(sigs, " ") {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		if subtle.ConstantTimeCompare([]byte(sig), want) == 1 {
			matched = true
		}
	}
	if !matched {
		return ErrWebhookSignature
	}
	return v.remember(id, now)
}

// sign is base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>")), padded.
func (v *WebhookVerifier) sign(id string, secs int64, body []byte) string {
	mac := hmac.New(sha256.New, v.key)
	fmt.Fprintf(mac, "%s.%d.", id, secs)
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func (v *WebhookVerifier) remember(id string, now time.Time) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if until, ok := v.seen[id]; ok && now.Before(until) {
		return ErrWebhookReplayed
	}
	if len(v.seen) >= maxSeenWebhooks {
		for k, until := range v.seen {
			if !now.Before(until) {
				delete(v.seen, k)
			}
		}
		if len(v.seen) >= maxSeenWebhooks {
			// Still full of live ids: refuse rather than forget one and accept its replay.
			return errors.New("webhook: too many recent webhook ids to track; retry later")
		}
	}
	// A replay is possible while its timestamp still verifies: up to 2×tolerance from now.
	v.seen[id] = now.Add(2 * WebhookTolerance)
	return nil
}
