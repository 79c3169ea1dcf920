package main

import (
	"syscall"
	"unsafe"
)

// execWithStdin is internal/agentproto/handoff.Exec, spelled with syscall alone (handoff
// imports os and golang.org/x/sys/unix, whose start-up the client must not pay): it replaces
// this process with bin, run with args and env, and with stdin holding data. The data goes in a
// memfd (a file in memory, which needs no writable directory and holds any size a pipe's buffer
// cannot) that becomes fd 0. It returns only when it fails.
//
// execve from a thread other than the process's first makes the kernel move the thread group's
// leadership first (measured 0.6 to 2 ms slower on 2 cores). main is not locked to the first
// thread, though: runtime.LockOSThread starts the runtime's template thread, which cost every
// call about 3% of a no-op's wall time. main, the client's one goroutine, leaves the first thread
// only when the scheduler preempts it, after about 10 ms in one system call or on the CPU; so a
// fall-back that did not wait on the sidecar execs from there, and one that waited that long may
// pay the move (measured 0.5 to 1 ms with a 20 ms deadline).
func execWithStdin(bin string, args, env []string, data []byte) error {
	name := [...]byte{'h', 'o', 'o', 'k', '-', 's', 't', 'd', 'i', 'n', 0}
	r, _, errno := syscall.Syscall(sysMemfdCreate, uintptr(unsafe.Pointer(&name[0])), mfdCloexec, 0)
	if errno != 0 {
		return errno
	}
	fd := int(r)
	defer syscall.Close(fd)
	if !writeAll(fd, data) {
		return syscall.EIO
	}
	if _, err := syscall.Seek(fd, 0, 0); err != nil {
		return err
	}
	// fd 0 without close-on-exec; the memfd itself is closed by the exec.
	if err := syscall.Dup3(fd, 0, 0); err != nil {
		return err
	}
	return syscall.Exec(bin, append([]string{bin}, args...), env)
}

const mfdCloexec = 1 // MFD_CLOEXEC
