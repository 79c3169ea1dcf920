package main

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestSharedLibs resolves Debian's bash the way the claude-agent image resolves claude: every
// library it needs, transitively, and its loader at the path the program names.
func TestSharedLibs(t *testing.T) {
	if _, ok := debianTriples[runtime.GOARCH]; !ok {
		t.Skipf("no Debian multiarch directory known for %s", runtime.GOARCH)
	}
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no /bin/bash on this machine")
	}
	files, err := sharedLibs(runtime.GOARCH, "/bin/bash")
	if err != nil {
		t.Fatal(err)
	}
	libDir := "lib/" + debianTriples[runtime.GOARCH].triple + "/"
	got := map[string]file{}
	for i, f := range files {
		got[f.path] = f
		if dir := f.path[:strings.LastIndex(strings.TrimSuffix(f.path, "/"), "/")+1]; dir != "" {
			if _, ok := got[dir]; !ok {
				t.Errorf("%s (entry %d) comes before its directory %s", f.path, i, dir)
			}
		}
	}
	for _, lib := range []string{"libc.so.6", "libtinfo.so.6"} {
		if f, ok := got[libDir+lib]; !ok || len(f.data) == 0 {
			t.Errorf("%s%s missing or empty", libDir, lib)
		}
	}
	var interp bool
	for _, f := range files {
		if f.link != "" {
			interp = true
			if _, ok := got[strings.TrimPrefix(f.link, "/")]; !ok {
				t.Errorf("%s links to %s, which the image lacks", f.path, f.link)
			}
		}
	}
	if !interp && runtime.GOARCH == "amd64" {
		t.Error("no /lib64 link to the dynamic loader")
	}
	if _, err := sharedLibs(runtime.GOARCH, "/nonexistent/program"); err == nil {
		t.Error("a missing program must be an error")
	}
}
