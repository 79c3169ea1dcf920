package main

import (
	"errors"
	"net"
	"testing"
	"time"
)

// fakeDial answers from a script: true is a made connection, false a failed one.
func fakeDial(script []bool, clock *time.Time) dialFunc {
	i := 0
	return func(_, _ string, _ time.Duration) (net.Conn, error) {
		*clock = clock.Add(100 * time.Millisecond)
		ok := script[min(i, len(script)-1)]
		i++
		if ok {
			c1, c2 := net.Pipe()
			c2.Close()
			return c1, nil
		}
		return nil, errors.New("connection refused")
	}
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script []bool
		want   int
	}{
		{"blocked from the start", []bool{false, false}, 0},
		{"open, then blocked", []bool{true, true, true, false, false}, 0},
		{"one failure between successes is not enforcement", []bool{true, false, true, false, false}, 0},
		{"never blocked: the pod fails", []bool{true}, 1},
		{"a single failure then open forever: the pod fails", []bool{false, true}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := time.Unix(0, 0)
			now := func() time.Time { return clock }
			got := run([]string{"--canary", "198.18.16.1:443", "--timeout", "5s", "--interval", "0s"}, now, fakeDial(tc.script, &clock))
			if got != tc.want {
				t.Fatalf("run = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRunNeedsACanary(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if got := run(nil, time.Now, net.DialTimeout); got != 1 {
		t.Fatalf("run without a canary = %d, want 1", got)
	}
}
