// Package promscrape reads a process's Prometheus /metrics in the text exposition format, for
// the tests and benchmarks that watch a manager or confirmer from outside.
package promscrape

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"time"
)

var client = &http.Client{Timeout: 10 * time.Second}

// Scrape returns every sample at url, keyed by the sample as written before its value: the
// metric's name, with its labels when it has any (confirmer_members, or
// rest_client_requests_total{code="200",host="...",method="GET"}). A scrape that takes over 10 s
// fails, so a caller polling an unreachable process does not hang on it.
func Scrape(url string) (map[string]float64, error) {
	resp, err := client.Get(url) //nolint:gosec // the caller's own process, on an address it chose
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, s.Err()
}
