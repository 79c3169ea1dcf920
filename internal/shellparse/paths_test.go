package shellparse

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestCleanAndResolvePath(t *testing.T) {
	for _, c := range []struct{ base, in, clean, resolved string }{
		{"/workspace", "/workspace/../etc/passwd", "/etc/passwd", "/etc/passwd"},
		{"/workspace", "//etc//passwd/", "/etc/passwd", "/etc/passwd"},
		{"/workspace", "/../../x", "/x", "/x"},
		{"/workspace", "./a/./b/", "a/b", "/workspace/a/b"},
		{"/workspace", "a/../../b", "../b", "/b"},
		{"/workspace/a", "../../../../etc", "../../../../etc", "/etc"},
		{"/workspace", "", ".", "/workspace"},
		{"/workspace", ".", ".", "/workspace"},
		{"/workspace", "~", "~", "~"},
		{"/workspace", "~/.ssh/../.ssh/id_rsa", "~/.ssh/id_rsa", "~/.ssh/id_rsa"},
		{"/workspace", "~/a/../../etc", "~/../etc", "~/../etc"},
		{"/workspace", "~root//x/", "~root/x", "~root/x"},
		{"", "src/../x", "x", "x"},
		{"", "../x", "../x", "../x"},
		{"~", "x", "x", "~/x"},
		{"rel", "x/..", ".", "rel"},
	} {
		if got := Clean(c.in); got != c.clean {
			t.Errorf("cleanPath(%q) = %q, want %q", c.in, got, c.clean)
		}
		if got := Resolve(c.base, c.in); got != c.resolved {
			t.Errorf("resolvePath(%q, %q) = %q, want %q", c.base, c.in, got, c.resolved)
		}
	}
}

func TestIsUnder(t *testing.T) {
	for _, c := range []struct {
		p, dir string
		want   bool
	}{
		{"/workspace/a.go", "/workspace", true},
		{"/workspace", "/workspace", true},
		{"/workspace/", "/workspace", true},
		{"/workspace/a", "/workspace/", true},
		{"//workspace//a", "/workspace", true},
		{"/workspace/../etc/passwd", "/workspace", false},
		{"/workspace/a/../../etc", "/workspace", false},
		{"/workspace/a/../b", "/workspace", true},
		{"/workspace-evil/x", "/workspace", false},
		{"/workspaces", "/workspace", false},
		{"/work", "/workspace", false},
		{"/etc", "/", true},
		{"/", "/", true},
		{"/", "/workspace", false},
		{"a/b", "/workspace", false},
		{"/workspace/a", "a", false},
		{"a/b", ".", true},
		{".", ".", true},
		{"../a", ".", false},
		{"a/../../b", ".", false},
		{"a/b", "a", true},
		{"ab", "a", false},
		{"../x/y", "../x", true},
		{"~/.ssh/id_rsa", "~/.ssh", true},
		{"~/x/../.ssh/id", "~/.ssh", true},
		{"~/../etc", "~", false},
		{"~", "~", true},
		{"~/x", "/", false},
		{"~other/x", "~", false},
		{"~/x", ".", false},
		{"", ".", true},
		{"/workspace/x", "", false},
	} {
		if got := IsUnder(c.p, c.dir); got != c.want {
			t.Errorf("isUnder(%q, %q) = %v, want %v", c.p, c.dir, got, c.want)
		}
	}
}

func TestBaseAndDirName(t *testing.T) {
	for _, c := range []struct{ in, base, dir string }{
		{"/workspace/a/b.go", "b.go", "/workspace/a"},
		{"/workspace/a/", "a", "/workspace"},
		{"/", "/", "/"},
		{"", ".", "."},
		{"x", "x", "."},
		{"~", "~", "~"},
		{"~/x", "x", "~"},
		{"/a/../.env", ".env", "/"},
	} {
		if got := Base(c.in); got != c.base {
			t.Errorf("baseName(%q) = %q, want %q", c.in, got, c.base)
		}
		if got := Dir(c.in); got != c.dir {
			t.Errorf("dirName(%q) = %q, want %q", c.in, got, c.dir)
		}
	}
}

// FuzzPaths checks the path functions against path/filepath and their own invariants: cleaning
// is idempotent, a path under a directory never climbs out of it, and for absolute paths
// IsUnder agrees with filepath.Rel.
func FuzzPaths(f *testing.F) {
	for _, s := range [][2]string{
		{"/workspace/../etc", "/workspace"}, {"/workspace-evil", "/workspace"}, {"a/../../b", "."},
		{"~/x/../../y", "~"}, {"//a//b/", "/a"}, {"", ""}, {"/", "/"}, {"../", ".."},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, p, dir string) {
		c := Clean(p)
		if Clean(c) != c {
			t.Fatalf("cleanPath is not idempotent on %q: %q then %q", p, c, Clean(c))
		}
		if strings.HasPrefix(p, "/") != strings.HasPrefix(c, "/") {
			t.Fatalf("cleanPath(%q) = %q changed whether the path is absolute", p, c)
		}
		if r := Resolve("/workspace", p); !strings.HasPrefix(r, "/") && !strings.HasPrefix(r, "~") {
			t.Fatalf("resolvePath(/workspace, %q) = %q is not absolute", p, r)
		}
		under := IsUnder(p, dir)
		if IsUnder(p, "/") != strings.HasPrefix(p, "/") {
			t.Fatalf("isUnder(%q, /) disagrees with the path being absolute", p)
		}
		if strings.HasPrefix(p, "/") && strings.HasPrefix(dir, "/") {
			rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(p))
			want := err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
			if under != want {
				t.Fatalf("isUnder(%q, %q) = %v, filepath.Rel says %q", p, dir, under, rel)
			}
		}
		if under && strings.HasPrefix(dir, "/") && !IsUnder(p, Dir(dir)) {
			t.Fatalf("%q is under %q but not under its parent", p, dir)
		}
	})
}
