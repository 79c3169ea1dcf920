package anthropic

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Retry defaults: the SDK's 2 retries (3 attempts), bounded in time as well.
const (
	DefaultMaxRetries      = 2
	DefaultMaxRetryElapsed = 30 * time.Second
)

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

// SleepContext waits d, or until ctx ends (then it returns ctx's error). It is the client's
// default Sleep, and the confirmer's watch loop waits out its backoff with it too.
func SleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
