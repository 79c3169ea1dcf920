package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// execWithStdin replaces this process with bin, run with args and the environment, and with
// stdin holding data: the hook JSON this process has already read. The data goes in a memfd (a
// file in memory, which needs no writable directory and holds any size a pipe's buffer cannot)
// that becomes fd 0. Replacing the process, rather than starting a child, keeps the pid the
// wrapper waits on and kills at its time limit, and leaves no second process that could answer
// after it. It returns only when it fails.
func execWithStdin(bin string, args []string, data []byte) error {
	fd, err := unix.MemfdCreate("gate-hook-stdin", unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "gate-hook-stdin")
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if _, err := f.Seek(0, 0); err != nil {
		return err
	}
	// fd 0 without close-on-exec; the memfd itself is closed by the exec.
	if err := unix.Dup3(fd, 0, 0); err != nil {
		return err
	}
	return syscall.Exec(bin, append([]string{bin}, args...), handOffEnv(os.Environ()))
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
