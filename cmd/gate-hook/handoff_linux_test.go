package main

import (
	"slices"
	"testing"
)

// TestHandOffEnv: gate-hook-cel starts with the environment gate-hook has, but for the
// collector's settings, which are replaced (never doubled) by GOGC=off and the memory limit.
func TestHandOffEnv(t *testing.T) {
	got := handOffEnv([]string{"PATH=/usr/bin:/bin", "GOGC=50", "HOME=/home/agent", "GOMEMLIMIT=1GiB"})
	want := []string{"PATH=/usr/bin:/bin", "HOME=/home/agent", "GOGC=off", "GOMEMLIMIT=268435456"}
	if !slices.Equal(got, want) {
		t.Fatalf("hand-off environment %q, want %q", got, want)
	}
}
