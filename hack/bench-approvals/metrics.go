package main

import (
	"bufio"
	"io"
	"strings"
)

// grepMetrics is the samples of the named metrics in a Prometheus text exposition, joined.
func grepMetrics(r io.Reader, names ...string) string {
	var out []string
	s := bufio.NewScanner(r)
	for s.Scan() {
		line := s.Text()
		for _, n := range names {
			if strings.HasPrefix(line, n+"{") || strings.HasPrefix(line, n+" ") {
				out = append(out, strings.TrimPrefix(line, "confirmer_"))
			}
		}
	}
	return strings.Join(out, ", ")
}
