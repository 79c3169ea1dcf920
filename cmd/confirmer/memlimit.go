package main

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitShare is the part of the container's memory limit the Go runtime aims to stay
// under; the rest is for what it does not count (the binary, thread stacks, buffers).
const memoryLimitShare = 0.8

// cgroupMemoryFiles hold the container's memory limit: cgroup v2, then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// setMemoryLimit makes the collector work harder as the confirmer nears its container's memory
// limit, rather than letting a burst of sessions (each streamed session costs about 20 KiB
// live, and the collector lets the heap grow to twice what is live) end in an OOM kill. An
// explicit GOMEMLIMIT wins; without a limit nothing changes. It returns the limit set, or 0.
func setMemoryLimit(files []string) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	for _, f := range files {
		if limit := cgroupLimit(f); limit > 0 {
			soft := int64(float64(limit) * memoryLimitShare)
			debug.SetMemoryLimit(soft)
			return soft
		}
	}
	return 0
}

// cgroupLimit reads a cgroup memory limit in bytes; 0 when the file is missing or says there
// is none ("max" in v2, a huge number in v1).
func cgroupLimit(path string) int64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0
	}
	return v
}
