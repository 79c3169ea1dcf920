package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNothingButSyscall: the client starts about as fast as a no-op binary because it
// links no package beyond what syscall itself does; os, time, strings, bytes (unicode) and
// golang.org/x/sys/unix each add start-up work measured in percent of a no-op's wall time.
func TestLinksNothingButSyscall(t *testing.T) {
	deps := func(pkg string) []string {
		t.Helper()
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	allowed := map[string]bool{}
	for _, p := range deps("syscall") {
		allowed[p] = true
	}
	self := deps(".")
	for _, p := range self[:len(self)-1] { // the last is the client itself
		if !allowed[p] {
			t.Errorf("gate-client links %s, which syscall does not", p)
		}
	}
}
