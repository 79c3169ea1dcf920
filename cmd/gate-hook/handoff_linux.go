package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/intutic/gate-operator/internal/agentproto/handoff"
)

// execWithStdin replaces this process with bin, run with args, and with stdin holding data: the
// hook JSON this process has already read (handoff.Exec). It returns only when it fails.
func execWithStdin(bin string, args []string, data []byte) error {
	return handoff.Exec(bin, args, handOffEnv(os.Environ()), data)
}

// handOffEnv is the environment gate-hook-cel starts with: this one, with the garbage
// collector off up to memoryLimit from the start, which main can set for itself only once the
// packages' initialisation (most of cel-go's start-up) has run.
func handOffEnv(env []string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			out = append(out, kv)
		}
	}
	return append(out, "GOGC=off", "GOMEMLIMIT="+strconv.Itoa(memoryLimit))
}

// execve from a thread other than the process's first makes the kernel move the thread
// group's leadership first (the hand-off measured 0.6 to 2 ms slower that way on 2 cores):
// main runs on the first thread.
func init() { runtime.LockOSThread() }
