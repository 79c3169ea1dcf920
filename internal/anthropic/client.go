package anthropic

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
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

// maxResponseBody bounds a response body that is read whole (lists, confirmations).
const maxResponseBody = 32 << 20

// ClientOptions configure a Client.
type ClientOptions struct {
	// BaseURL of the API; DefaultBaseURL when empty.
	BaseURL string
	// APIKeyFile holds the API key; it is re-read whenever the file changes (a Secret volume
	// swaps it through a symlink).
	APIKeyFile string
	// APIKey is the key itself, for a caller that holds it in memory (the manager, which reads
	// it from the Secret for one lookup); APIKeyFile is not read when it is set.
	APIKey string
	// WorkspaceID, when set, is sent as anthropic-workspace-id.
	WorkspaceID string
	// HTTPClient sends the requests; when nil, a transport of the client's own (HTTP/2 over
	// TLS, with the connection health checks below).
	HTTPClient *http.Client
	// RootCAs are the certificate authorities trusted for the API (a test fake, a TLS-inspecting
	// egress proxy); the system roots when nil. Ignored with HTTPClient.
	RootCAs *x509.CertPool
	// MaxRetries and MaxRetryElapsed bound the retries of one call by count and by time.
	MaxRetries      int
	MaxRetryElapsed time.Duration
	// UserAgent identifies the caller.
	UserAgent string
	// Sleep waits out the delay before a retry and returns early with ctx's error; a timer
	// when nil. Tests of the packages above pass one that returns at once.
	Sleep func(context.Context, time.Duration) error
	// now and jitter are replaced by this package's tests.
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
		key:        &keyFile{path: o.APIKeyFile, value: strings.TrimSpace(o.APIKey), static: o.APIKey != ""},
		workspace:  o.WorkspaceID,
		userAgent:  o.UserAgent,
		maxRetries: o.MaxRetries,
		maxElapsed: o.MaxRetryElapsed,
		sleep:      o.Sleep,
		now:        o.now,
		jitter:     o.jitter,
	}
	if c.http == nil {
		c.http = &http.Client{Transport: newTransport(o.RootCAs)}
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
		c.sleep = SleepContext
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

// HTTP/2 settings of the client's transport. The API multiplexes every session stream, list
// and confirmation of a replica on a few connections (as many as the server's concurrent
// stream limit requires), so one connection that dies silently would stall hundreds of
// sessions until their idle timeouts: a connection that receives nothing for h2PingAfter is
// pinged, and closed if the answer takes longer than h2PingTimeout, failing its streams so
// they reconnect at once. The per-stream receive window bounds what a stream that is not
// read can buffer (the default is 4 MiB); events are read as they arrive.
const (
	h2PingAfter        = 20 * time.Second
	h2PingTimeout      = 10 * time.Second
	h2StreamWindow     = 1 << 20
	maxIdleConnsToHost = 64
)

// newTransport is DefaultTransport's settings with HTTP/2 health checks and the given roots.
// Over plain HTTP (a loopback fake, a test server) it speaks HTTP/1.1, one connection per
// stream, which is why it keeps more idle connections than the default two.
func newTransport(roots *x509.CertPool) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ForceAttemptHTTP2 = true
	t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	t.MaxIdleConnsPerHost = maxIdleConnsToHost
	// Requests are small; over HTTP/1.1 a stream holds its connection's buffers for hours.
	t.WriteBufferSize = 1 << 10
	t.HTTP2 = &http.HTTP2Config{SendPingTimeout: h2PingAfter, PingTimeout: h2PingTimeout, MaxReceiveBufferPerStream: h2StreamWindow}
	return t
}

// keyFile caches the API key and re-reads it when the file's identity or size changes; a
// static key (ClientOptions.APIKey) has no file.
type keyFile struct {
	path   string
	static bool

	mu      sync.Mutex
	modTime time.Time
	size    int64
	value   string
}

func (k *keyFile) get() (string, error) {
	if k.static {
		if k.value == "" {
			return "", errors.New("API key is empty")
		}
		return k.value, nil
	}
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

// getJSON performs a GET and decodes the 2xx body into out.
func (c *Client) getJSON(ctx context.Context, path string, q query, out any) error {
	resp, err := c.send(ctx, http.MethodGet, c.endpoint(path, q), nil)
	if err != nil {
		return err
	}
	return decodeBody(resp, out)
}

// getOne fetches the object at collection/{id}, id encoded as the path parameter param.
func getOne[T any](ctx context.Context, c *Client, collection, param, id string) (*T, error) {
	seg, err := pathSegment(param, id)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := c.getJSON(ctx, collection+"/"+seg, nil, out); err != nil {
		return nil, err
	}
	return out, nil
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
