// Package handoff replaces the running process with a hook that reads, on its stdin, the hook
// input the process has already read: gate-hook hands a call that needs CEL to gate-hook-cel
// this way (gate-client, which links syscall alone, spells the same hand-off again in
// cmd/gate-client/handoff.go). It imports only os, syscall and golang.org/x/sys/unix.
package handoff

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Exec replaces this process with bin, run with args and env, and with stdin holding data. The
// data goes in a memfd (a file in memory, which needs no writable directory and holds any size
// a pipe's buffer cannot) that becomes fd 0. Replacing the process, rather than starting a
// child, keeps the pid the wrapper waits on and kills at its time limit, and leaves no second
// process that could answer after it. It returns only when it fails.
//
// execve from a thread other than the process's first makes the kernel move the thread group's
// leadership first (measured 0.6 to 2 ms slower on 2 cores), so a caller locks main to the
// first thread (runtime.LockOSThread in an init function).
func Exec(bin string, args, env []string, data []byte) error {
	fd, err := unix.MemfdCreate("hook-stdin", unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "hook-stdin")
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
	return syscall.Exec(bin, append([]string{bin}, args...), env)
}
