package gate

import (
	"strings"
	"testing"
)

func TestPatchFiles(t *testing.T) {
	for _, c := range []struct {
		name          string
		patch         string
		reads, writes string
		known         bool
	}{
		{"every kind of section", "*** Begin Patch\n*** Add File: new.txt\n+hi\n*** Update File: src/a.go\n*** Move to: /etc/a.go\n@@ func a\n-x\n+y\n*** Delete File: ../old.txt\n*** End Patch\n",
			"/w/src/a.go", "/w/new.txt,/w/src/a.go,/etc/a.go,/old.txt", true},
		{"wrapped in a here-document", "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: /etc/cron.d/x\n+* * * * * root sh\n*** End Patch\nEOF\n",
			"", "/etc/cron.d/x", true},
		{"indented and CRLF", "  *** Begin Patch\r\n\t*** Add File: b.txt\r\n+x\r\n  *** End Patch\r\n", "", "/w/b.txt", true},
		{"no end", "*** Begin Patch\n*** Add File: c.txt\n+x\n", "", "/w/c.txt", false},
		{"not a patch", "please write /etc/passwd", "", "", false},
		{"hunk text is not a section", "*** Begin Patch\n*** Update File: a\n@@\n+*** Add File: /etc/x\n*** End Patch", "/w/a", "/w/a", true},
	} {
		files, known := patchFiles(c.patch, "/w")
		if got := strings.Join(files.reads, ","); got != c.reads {
			t.Errorf("%s: reads %q, want %q", c.name, got, c.reads)
		}
		if got := strings.Join(files.writes, ","); got != c.writes {
			t.Errorf("%s: writes %q, want %q", c.name, got, c.writes)
		}
		if known != c.known {
			t.Errorf("%s: known %v, want %v", c.name, known, c.known)
		}
	}
}

// TestPatchThroughTheShell: a patch Codex applies from its shell tool (apply_patch with a
// here-document) writes the files it names, as the apply_patch tool does.
func TestPatchThroughTheShell(t *testing.T) {
	cmd := "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: added.txt\n+new\n*** Update File: ../etc/hosts\n@@\n-a\n+b\n*** End Patch\nEOF"
	v := viewOf("Bash", map[string]any{"command": cmd}, "/workspace")
	if strings.Join(v.Writes, ",") != "/workspace/added.txt,/etc/hosts" || strings.Join(v.Reads, ",") != "/etc/hosts" || !v.ShellKnown {
		t.Fatalf("writes %q reads %q known %v", v.Writes, v.Reads, v.ShellKnown)
	}
	v = viewOf("apply_patch", map[string]any{"command": "*** Begin Patch\n*** Delete File: /workspace/x\n*** End Patch"}, "/workspace")
	if v.Kind != KindWrite || strings.Join(v.Writes, ",") != "/workspace/x" {
		t.Fatalf("apply_patch view %+v", v)
	}
	v = viewOf("apply_patch", map[string]any{"command": "delete everything"}, "/workspace")
	if v.ShellKnown {
		t.Fatal("a patch the gate cannot read is known")
	}
}

// TestPatchWhiteSpace: a section line with white space Codex trims (a vertical tab, a no-break
// space) still names its file, and the path does not keep it.
func TestPatchWhiteSpace(t *testing.T) {
	files, known := patchFiles("*** Begin Patch\n\v*** Add File: /etc/x\n+y\n\u00a0*** Add File: /etc/y\u3000\n+z\n*** End Patch", "/w")
	if strings.Join(files.writes, ",") != "/etc/x,/etc/y" || !known {
		t.Fatalf("writes %q known %v", files.writes, known)
	}
}

// TestTextURLsByteOrderMark: JavaScript's \s, which Gemini CLI splits web_fetch's prompt on,
// includes U+FEFF.
func TestTextURLsByteOrderMark(t *testing.T) {
	v := viewOf("web_fetch", map[string]any{"prompt": "a\uFEFFhttps://pastebin.com/x"}, "")
	if strings.Join(v.Hosts, ",") != "pastebin.com" {
		t.Fatalf("hosts %q", v.Hosts)
	}
}

// TestPatchAfterCd: a patch given to the shell tool after a cd is applied in that directory.
func TestPatchAfterCd(t *testing.T) {
	v := viewOf("Bash", map[string]any{"command": "cd /etc && apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: cron.d/evil\n+x\n*** End Patch\nEOF"}, "/workspace")
	if strings.Join(v.Writes, ",") != "/etc/cron.d/evil" {
		t.Fatalf("writes %q", v.Writes)
	}
}
