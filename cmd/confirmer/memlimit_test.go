package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestSetMemoryLimitFollowsTheContainer(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1)) // restore whatever was in force
	t.Setenv("GOMEMLIMIT", "")
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v2, v1 := write("memory.max", "268435456\n"), write("memory.limit_in_bytes", "9223372036854771712\n")
	if got := setMemoryLimit([]string{v2, v1}); got != 214748364 || debug.SetMemoryLimit(-1) != got {
		t.Fatalf("a 256Mi limit set %d, want 80%%", got)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	for name, files := range map[string][]string{
		"no limit (v2)":          {write("max", "max\n")},
		"no limit (v1)":          {v1},
		"no cgroup files at all": {filepath.Join(dir, "missing")},
	} {
		if got := setMemoryLimit(files); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
			t.Errorf("%s: set %d", name, got)
		}
	}
	t.Setenv("GOMEMLIMIT", "100MiB")
	if got := setMemoryLimit([]string{v2}); got != 0 {
		t.Errorf("GOMEMLIMIT is set, yet the limit was changed to %d", got)
	}
}
