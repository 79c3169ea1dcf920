// Package promscrape reads a process's Prometheus /metrics in the text exposition format, for
// the tests and benchmarks that watch a manager or confirmer from outside.
package promscrape

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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

// Families returns every metric family at url, with its type and its series' labels (for the
// checks of which metrics and labels a process serves). A token, when not empty, is sent as a
// bearer token, and then the server's certificate is not verified: the manager serves its
// metrics over HTTPS with a self-signed certificate to authorized tokens.
func Families(url, token string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	c := client
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
		c = &http.Client{Timeout: client.Timeout, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the manager's self-signed metrics certificate
		}}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}
