package gate

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"cel.dev/cel-go/cel"
)

var checkedRules = []Rule{
	{Name: "rm-data", Tools: []string{"bash"}, When: `input.command.matches("rm\\s+-rf\\s+/data")`, Action: Block, Reason: "no data removal"},
	{Name: "writes-outside", When: `call.writes.exists(p, !p.isUnder("/workspace"))`, Action: Block, Reason: "writes stay in /workspace"},
	{Name: "no-task-stop", Tools: []string{"TaskStop"}, Action: Block, Reason: "tasks are not stopped"},
	{Name: "hosts", Tools: []string{"WebFetch"}, When: `call.hosts.exists(h, h != "pkg.go.dev")`, Action: Ask, Reason: "fetches are reviewed"},
}

var checkedCalls = []Call{
	{Tool: "Bash", Input: map[string]any{"command": "rm -rf /data/x"}, Cwd: "/workspace"},
	{Tool: "Bash", Input: map[string]any{"command": "go test ./..."}, Cwd: "/workspace"},
	{Tool: "Write", Input: map[string]any{"file_path": "/etc/passwd", "content": "x"}, Cwd: "/workspace"},
	{Tool: "Write", Input: map[string]any{"file_path": "/workspace/a.go", "content": "x"}, Cwd: "/workspace"},
	{Tool: "TaskStop", Input: map[string]any{"task_id": "t1"}},
	{Tool: "WebFetch", Input: map[string]any{"url": "https://example.com/", "prompt": "p"}},
	{Tool: "WebFetch", Input: map[string]any{"url": "https://pkg.go.dev/x", "prompt": "p"}},
}

// writeBundle writes a snapshot and, when not nil, a checked rules file into a new directory,
// as a pod's volume holds them, and returns the snapshot's path.
func writeBundle(t *testing.T, snapshot, checked []byte) string {
	t.Helper()
	dir := t.TempDir()
	if checked != nil {
		if err := os.WriteFile(filepath.Join(dir, CheckedFileName), checked, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, SnapshotFileName)
	if err := os.WriteFile(path, snapshot, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// decideFromFile decides each call as gate-hook-cel does (the snapshot loaded from its file,
// the call's tool's rules compiled) and returns the decisions without their incident IDs and
// how many expressions were parsed and checked on the way.
func decideFromFile(t *testing.T, path string) ([]Decision, int64) {
	t.Helper()
	before := expressionChecks.Load()
	var out []Decision
	for _, c := range checkedCalls {
		s, err := LoadSnapshotFile(path, "")
		if err != nil {
			t.Fatal(err)
		}
		p, errs := CompileFor(s, c.Tool, c.Server)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		d := p.Decide(&c)
		d.IncidentID = ""
		out = append(out, d)
	}
	return out, expressionChecks.Load() - before
}

// TestCheckedRulesAgree: with the checked rules file beside the snapshot, the hook's way of
// deciding plans every expression from it (none is parsed or checked) and decides every call
// as it does from the rules' source; a file that does not belong (another snapshot's, another
// format's, corrupt, a bad entry) is ignored, whole or for its entry, and the rules compile
// from their source.
func TestCheckedRulesAgree(t *testing.T) {
	s, checked, err := BuildSnapshotChecked(PolicyMeta{Policy: "agents/p", Generation: 1}, checkedRules)
	if err != nil {
		t.Fatal(err)
	}
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want, checks := decideFromFile(t, writeBundle(t, data, nil))
	if checks == 0 {
		t.Fatal("without the checked rules file, no expression was checked")
	}
	verdicts := map[Verdict]int{}
	for _, d := range want {
		verdicts[d.Verdict]++
	}
	if verdicts[Block] < 3 || verdicts[Ask] != 1 || verdicts[Allow] < 2 {
		t.Fatalf("the calls do not exercise the rules: %v", verdicts)
	}

	same := func(name string, got []Decision) {
		t.Helper()
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("%s: call %d decided %+v, from the source %+v", name, i, got[i], want[i])
			}
		}
	}
	got, checks := decideFromFile(t, writeBundle(t, data, checked))
	same("checked rules", got)
	if checks != 0 {
		t.Errorf("with the checked rules file, %d expressions were still parsed and checked", checks)
	}

	other, otherChecked, err := BuildSnapshotChecked(PolicyMeta{Policy: "agents/p", Generation: 2}, checkedRules)
	if err != nil || other.Digest == s.Digest {
		t.Fatalf("another snapshot: %v", err)
	}
	f, ok := parseCheckedFile(checked)
	if !ok {
		t.Fatalf("the checked rules file does not parse:\n%s", checked)
	}
	if !bytes.Equal(f.encode(), checked) {
		t.Fatal("the checked rules file does not encode back to itself")
	}
	version, badEntry, baseEnv, fullEnv := f, f, f, f
	version.CEL = "v0.0.1"
	// Files checked in an environment that declared otherwise (a variable, a function, an
	// overload more or less) than this build's: the digest of the declarations differs.
	baseEnv.BaseEnv = "sha256:" + strings.Repeat("0", 64)
	fullEnv.FullEnv = "sha256:" + strings.Repeat("0", 64)
	badEntry.Rules = append([][]byte{}, f.Rules...)
	badEntry.Rules[0] = []byte("bm90IGEgQ2hlY2tlZEV4cHI=") // base64 of "not a CheckedExpr"
	format := bytes.Replace(checked, []byte(checkedFormat), []byte("gate.intutic.io/checked-rules/v1"), 1)
	truncated := checked[:bytes.LastIndexByte(checked[:len(checked)-1], '\n')+1]
	for _, c := range []struct {
		name    string
		checked []byte
		checks  int64 // expressions compiled from their source
	}{
		{"another snapshot's", otherChecked, -1},
		{"another format", format, -1},
		{"another cel-go", version.encode(), -1},
		{"another base environment's", baseEnv.encode(), -1},
		{"another full environment's", fullEnv.encode(), -1},
		{"not this format", []byte("{"), -1},
		{"an entry short", truncated, -1},
		{"a bad entry", badEntry.encode(), 1},
	} {
		got, checks := decideFromFile(t, writeBundle(t, data, c.checked))
		same(c.name, got)
		if c.checks >= 0 && checks != c.checks || c.checks < 0 && checks == 0 {
			t.Errorf("%s: %d expressions were parsed and checked", c.name, checks)
		}
	}
}

// TestEnvDigestFollowsDeclarations: the digest a checked rules file is bound to changes with any
// declaration the environment gains (a variable, a function, an overload of one it has, a
// library), is the same for two builds of one environment, and tells the two environments
// apart; a file checked in the environment before the change is not used (its rules compile
// from their source).
func TestEnvDigestFollowsDeclarations(t *testing.T) {
	base, err := baseEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	full, err := environment()
	if err != nil {
		t.Fatal(err)
	}
	d := envDigest(base)
	if !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+64 {
		t.Fatalf("digest %q", d)
	}
	if envDigest(full) == d {
		t.Fatal("the base and the full environment have one digest")
	}
	again, err := cel.NewEnv(baseOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	if envDigest(again) != d {
		t.Fatal("two builds of the base environment have different digests")
	}
	str := cel.StringType
	for name, opt := range map[string]cel.EnvOption{
		"a variable":                cel.Variable("extra", str),
		"a variable's type":         cel.Variable(varTool, cel.DynType),
		"a function":                cel.Function("extra", cel.Overload("extra_string", []*cel.Type{str}, str)),
		"an overload of a function": cel.Function("size", cel.Overload("size_extra_int", []*cel.Type{cel.IntType}, cel.IntType)),
		"a member overload":         cel.Function("extra", cel.MemberOverload("string_extra", []*cel.Type{str}, cel.BoolType)),
		"a library":                 cel.OptionalTypes(),
	} {
		extended, err := base.Extend(opt)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if envDigest(extended) == d {
			t.Errorf("adding %s leaves the digest as it was", name)
		}
	}

	// A file checked in the environment before the change names the old digest: this build
	// does not use it.
	s, checked, err := BuildSnapshotChecked(PolicyMeta{Policy: "agents/p", Generation: 1}, checkedRules)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := s.Encode()
	f, ok := parseCheckedFile(checked)
	if !ok || f.BaseEnv != d || f.FullEnv != envDigest(full) {
		t.Fatalf("the checked rules file names environments %q %q, want %q %q", f.BaseEnv, f.FullEnv, d, envDigest(full))
	}
	extended, _ := base.Extend(cel.Variable("extra", str))
	old := f
	old.BaseEnv = envDigest(extended)
	if _, checks := decideFromFile(t, writeBundle(t, data, old.encode())); checks == 0 {
		t.Fatal("a file checked in another environment was used")
	}
}
