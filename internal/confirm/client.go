package confirm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Wire constants of the Sessions API (specs/managed-agents-wire.md §1).
const (
	DefaultBaseURL   = "https://api.anthropic.com"
	AnthropicVersion = "2026-10-21"
	BetaManaged      = "managed-agents-2026-04-01"
)

// Retry defaults: the SDK's 2 retries (3 attempts), bounded in time as well.
const (
	DefaultMaxRetries      = 2
	DefaultMaxRetryElapsed = 30 * time.Second
	maxResponseBody        = 32 << 20
)

// ClientOptions configure a Client.
type ClientOptions struct {
	// BaseURL of the API; DefaultBaseURL when empty.
	BaseURL string
	// APIKeyFile holds the API key; it is re-read whenever the file changes (a Secret volume
	// swaps it through a symlink).
	APIKeyFile string
	// WorkspaceID, when set, is sent as anthropic-workspace-id.
	WorkspaceID string
	// HTTPClient sends the requests; http.DefaultClient's transport when nil.
	HTTPClient *http.Client
	// MaxRetries and MaxRetryElapsed bound the retries of one call by count and by time.
	MaxRetries      int
	MaxRetryElapsed time.Duration
	// UserAgent identifies the caller.
	UserAgent string
	// sleep, now and jitter are replaced by tests.
	sleep  func(context.Context, time.Duration) error
	now    func() time.Time
	jitter func() float64
}

// Client calls the Sessions API. It is safe for concurrent use.
type Client struct {
	base       *url.URL
	http       *http.Client
	key        *keyFile
	workspace  string
	userAgent  string
	maxRetries int
	maxElapsed time.Duration
	sleep      func(context.Context, time.Duration) error
	now        func() time.Time
	jitter     func() float64
}

// NewClient returns a client. The key file must exist and hold a key.
func NewClient(o ClientOptions) (*Client, error) {
	base := o.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("base URL %q is not an http or https URL", base)
	}
	c := &Client{
		base:       u,
		http:       o.HTTPClient,
		key:        &keyFile{path: o.APIKeyFile},
		workspace:  o.WorkspaceID,
		userAgent:  o.UserAgent,
		maxRetries: o.MaxRetries,
		maxElapsed: o.MaxRetryElapsed,
		sleep:      o.sleep,
		now:        o.now,
		jitter:     o.jitter,
	}
	if c.http == nil {
		// Streams hold connections of their own; keep enough idle ones that lists and
		// confirmations do not open a new connection each time.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		// Requests are small; a stream holds its connection's buffers for hours.
		t.WriteBufferSize = 1 << 10
		c.http = &http.Client{Transport: t}
	}
	if c.userAgent == "" {
		c.userAgent = "gate-operator-confirmer"
	}
	if o.MaxRetries == 0 {
		c.maxRetries = DefaultMaxRetries
	}
	if c.maxRetries < 0 {
		c.maxRetries = 0
	}
	if c.maxElapsed == 0 {
		c.maxElapsed = DefaultMaxRetryElapsed
	}
	if c.sleep == nil {
		c.sleep = sleepCtx
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.jitter == nil {
		c.jitter = rand.Float64
	}
	if _, err := c.key.get(); err != nil {
		return nil, err
	}
	return c, nil
}

// keyFile caches the API key and re-reads it when the file's identity or size changes.
type keyFile struct {
	path string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	value   string
}

func (k *keyFile) get() (string, error) {
	fi, err := os.Stat(k.path)
	if err != nil {
		return "", fmt.Errorf("API key file: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.value != "" && fi.ModTime().Equal(k.modTime) && fi.Size() == k.size {
		return k.value, nil
	}
	raw, err := os.ReadFile(k.path)
	if err != nil {
		return "", fmt.Errorf("API key file: %w", err)
	}
	v := strings.TrimSpace(string(raw))
	if v == "" {
		return "", fmt.Errorf("API key file %s is empty", k.path)
	}
	k.value, k.modTime, k.size = v, fi.ModTime(), fi.Size()
	return v, nil
}

// query is an ordered query string; arrays are written key[]=v, one pair per element, and
// everything but A-Z a-z 0-9 - . _ ~ is percent-encoded with uppercase hex (specs §1.5).
type query []queryPair

type queryPair struct{ key, value string }

func (q query) add(key, value string) query { return append(q, queryPair{key, value}) }

func (q query) addAll(key string, values []string) query {
	for _, v := range values {
		q = append(q, queryPair{key + "[]", v})
	}
	return q
}

// with returns q with key set to value: replaced in place when present, else appended.
func (q query) with(key, value string) query {
	out := append(query{}, q...)
	for i := range out {
		if out[i].key == key {
			out[i].value = value
			return out
		}
	}
	return append(out, queryPair{key, value})
}

func (q query) encode() string {
	var b strings.Builder
	for i, p := range q {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(rfc3986(p.key))
		b.WriteByte('=')
		b.WriteString(rfc3986(p.value))
	}
	return b.String()
}

func rfc3986(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// pathSegment encodes a path parameter; empty, "." and ".." are refused (specs §1.1).
func pathSegment(name, v string) (string, error) {
	if v == "" || v == "." || v == ".." {
		return "", fmt.Errorf("%s %q is not a valid path parameter", name, v)
	}
	return url.PathEscape(v), nil
}

func (c *Client) endpoint(path string, q query) string {
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawPath = ""
	s := u.String()
	if len(q) > 0 {
		s += "?" + q.encode()
	}
	return s
}

// newRequest builds a request with the headers the SDK sends on every Sessions call.
func (c *Client) newRequest(ctx context.Context, method, target string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, r)
	if err != nil {
		return nil, err
	}
	key, err := c.key.get()
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("anthropic-version", AnthropicVersion)
	req.Header.Set("anthropic-beta", BetaManaged)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("User-Agent", c.userAgent)
	if c.workspace != "" {
		req.Header.Set("anthropic-workspace-id", c.workspace)
	}
	return req, nil
}

// send performs a call with the retry policy: connection errors, 408, 409, 429 and 5xx are
// retried (x-should-retry overrides), waiting retry-after-ms, retry-after or the jittered
// default backoff, up to maxRetries times and maxElapsed in all. It returns the response of
// a 2xx, with its body still to read, or the last error.
func (c *Client) send(ctx context.Context, method, target string, body []byte) (*http.Response, error) {
	start := c.now()
	for attempt := 0; ; attempt++ {
		req, err := c.newRequest(ctx, method, target, body)
		if err != nil {
			return nil, err
		}
		resp, err := c.http.Do(req)
		var delay time.Duration
		var lastErr error
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			lastErr = &ConnectionError{Op: method + " " + req.URL.Path, Err: err}
			delay = c.backoff(attempt)
		} else if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		} else {
			raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
			resp.Body.Close()
			lastErr = parseAPIError(resp.StatusCode, resp.Header, raw)
			if !shouldRetry(resp) {
				return nil, lastErr
			}
			delay = retryAfter(resp.Header)
			if delay <= 0 {
				delay = c.backoff(attempt)
			}
		}
		if attempt >= c.maxRetries || c.now().Sub(start)+delay > c.maxElapsed {
			return nil, lastErr
		}
		if err := c.sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}

func shouldRetry(resp *http.Response) bool {
	switch resp.Header.Get("x-should-retry") {
	case "true":
		return true
	case "false":
		return false
	}
	return retryableStatus(resp.StatusCode)
}

// retryAfter reads retry-after-ms (float milliseconds), else retry-after (float seconds or an
// HTTP date); a value outside (0, 2^31-1 ms] is ignored.
func retryAfter(h http.Header) time.Duration {
	const maxMs = math.MaxInt32
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms <= maxMs {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := h.Get("retry-after"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if s > 0 && s*1000 <= maxMs {
				return time.Duration(s * float64(time.Second))
			}
			return 0
		}
		if t, err := http.ParseTime(v); err == nil {
			if d := time.Until(t); d > 0 && d <= maxMs*time.Millisecond {
				return d
			}
		}
	}
	return 0
}

// backoff is the SDK's default: min(0.5 s × 2^n, 8 s) × (1 − jitter·0.25).
func (c *Client) backoff(retries int) time.Duration {
	d := min(500*time.Millisecond<<min(retries, 10), 8*time.Second)
	return time.Duration(float64(d) * (1 - c.jitter()*0.25))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// getJSON performs a GET and decodes the 2xx body into out.
func (c *Client) getJSON(ctx context.Context, path string, q query, out any) error {
	resp, err := c.send(ctx, http.MethodGet, c.endpoint(path, q), nil)
	if err != nil {
		return err
	}
	return decodeBody(resp, out)
}

func decodeBody(resp *http.Response, out any) error {
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody+1))
	if err != nil {
		return &ConnectionError{Op: "reading the response", Err: err}
	}
	if len(raw) > maxResponseBody {
		return fmt.Errorf("anthropic API: response larger than %d bytes", maxResponseBody)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("anthropic API: response is not the expected JSON: %w", err)
	}
	return nil
}

// page is the PageCursor envelope: a next page exists exactly when next_page is non-empty.
type page[T any] struct {
	Data     []T     `json:"data"`
	NextPage *string `json:"next_page"`
}

// listAll follows next_page, reusing every original parameter and adding or replacing page.
func listAll[T any](ctx context.Context, c *Client, path string, q query, maxPages int) ([]T, error) {
	var all []T
	cur := q
	for n := 0; ; n++ {
		if n >= maxPages {
			return nil, fmt.Errorf("anthropic API: %s returned more than %d pages", path, maxPages)
		}
		var p page[T]
		if err := c.getJSON(ctx, path, cur, &p); err != nil {
			return nil, err
		}
		all = append(all, p.Data...)
		if p.NextPage == nil || *p.NextPage == "" {
			return all, nil
		}
		cur = q.with("page", *p.NextPage)
	}
}

// errEmpty is returned for calls that need at least one item.
var errEmpty = errors.New("nothing to send")
