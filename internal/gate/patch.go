package gate

import (
	"slices"
	"strings"

	"github.com/intutic/gate-operator/internal/shellparse"
)

// patchTouches are the files a patch in the apply_patch format names: what it writes (every
// file it adds, updates, deletes or moves a file to) and what it reads (every file it updates or
// moves), resolved against the working directory.
type patchTouches struct {
	reads, writes []string
}

// The apply_patch format's file lines (codex-rs apply-patch, the format Codex's apply_patch tool
// takes): a patch is "*** Begin Patch", file sections, "*** End Patch"; a section starts with one
// of these, and an update may name its new path with "*** Move to: ".
const (
	patchBegin  = "*** Begin Patch"
	patchEnd    = "*** End Patch"
	patchAdd    = "*** Add File: "
	patchUpdate = "*** Update File: "
	patchDelete = "*** Delete File: "
	patchMove   = "*** Move to: "
)

// patchCommands are the names under which Codex applies a patch given on the command line
// itself (apply_patch <<'EOF' ... EOF through its shell tool), without running a program: the
// files of such a line are the patch's, read from the whole line.
var patchCommands = []string{"apply_patch", "applypatch"}

func isPatchCommand(c shellparse.Command) bool { return slices.Contains(patchCommands, c.Name) }

// patchFiles lists the files of a patch in the apply_patch format. Every line that names a file
// counts, wherever it is and with white space around it ignored, so a line the tool would read as
// hunk text at worst adds a file the rules see too. known is false when the text has no
// "*** Begin Patch" and "*** End Patch" lines (it is not a patch the gate can read; the tool
// also accepts one wrapped in a here-document, whose lines are read all the same).
func patchFiles(patch, cwd string) (files patchTouches, known bool) {
	var begin, end bool
	for line := range strings.Lines(patch) {
		// Codex's parser trims every white-space character (Rust's trim), so the gate does too.
		line = strings.TrimSpace(line)
		switch {
		case line == patchBegin:
			begin = true
		case line == patchEnd:
			end = true
		case strings.HasPrefix(line, patchAdd):
			files.writes = append(files.writes, shellparse.Resolve(cwd, strings.TrimPrefix(line, patchAdd)))
		case strings.HasPrefix(line, patchDelete):
			files.writes = append(files.writes, shellparse.Resolve(cwd, strings.TrimPrefix(line, patchDelete)))
		case strings.HasPrefix(line, patchUpdate):
			p := shellparse.Resolve(cwd, strings.TrimPrefix(line, patchUpdate))
			files.reads = append(files.reads, p)
			files.writes = append(files.writes, p)
		case strings.HasPrefix(line, patchMove):
			files.writes = append(files.writes, shellparse.Resolve(cwd, strings.TrimPrefix(line, patchMove)))
		}
	}
	return files, begin && end
}
