//go:build !linux

// Package handoff replaces the running process with a hook that reads, on its stdin, the hook
// input the process has already read. It is implemented for Linux, where sandbox pods run.
package handoff

import "errors"

// Exec fails: handing a call on is implemented only on Linux, and the caller refuses the call.
func Exec(string, []string, []string, []byte) error {
	return errors.New("handing a call to another hook is implemented only on Linux")
}
