package gate

import (
	"testing"

	"github.com/intutic/gate-operator/internal/gate/toolname"
)

// TestBuildSnapshotChecksEachExpressionOnce: a snapshot build parses and type-checks each
// rule's expression once, validation and prefilter derivation alike (it used to do it twice).
func TestBuildSnapshotChecksEachExpressionOnce(t *testing.T) {
	rules := []Rule{
		{Name: "a", Tools: []string{"bash"}, When: `input.command.contains("rm")`, Action: Block, Reason: "a"},
		{Name: "b", Tools: []string{"write"}, When: `input.file_path.startsWith("/etc/")`, Action: Block, Reason: "b"},
		{Name: "c", Tools: []string{"read"}, Action: Allow},
	}
	before := expressionChecks.Load()
	if _, err := BuildSnapshot(PolicyMeta{Policy: "a/b"}, rules); err != nil {
		t.Fatal(err)
	}
	if got := expressionChecks.Load() - before; got != 2 {
		t.Fatalf("two expressions were checked %d times", got)
	}
}

// TestCompileForResolvesTheToolOnce: a policy compiled for a call's tool decides that call
// with the resolution CompileFor made, and any other call with its own; both are the ones
// toolname.Resolve gives.
func TestCompileForResolvesTheToolOnce(t *testing.T) {
	s, err := BuildSnapshot(PolicyMeta{Policy: "a/b"}, []Rule{{Name: "r", Tools: []string{"mcp__github__*"}, Action: Block, Reason: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	calls := [][2]string{{"Bash", ""}, {"web_fetch", ""}, {"mcp__github__x", "GitHub"}, {"x", "github"}, {"x", "github__evil"}, {"mcp__", ""}, {"mcp__a__b", "c"}}
	for _, compiled := range calls {
		p, _ := CompileFor(s, compiled[0], compiled[1])
		if p.only.resolved != (toolname.Tool{}) && p.only.key != p.only.resolved.Key {
			t.Errorf("%v: compiled for key %q, resolved as %+v", compiled, p.only.key, p.only.resolved)
		}
		for _, c := range calls {
			got, gotErr := p.resolve(&Call{Tool: c[0], Server: c[1]})
			want, wantErr := toolname.Resolve(c[0], c[1])
			if got != want || (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
				t.Errorf("compiled for %v, call %v: resolved %+v %v, want %+v %v", compiled, c, got, gotErr, want, wantErr)
			}
		}
	}
}
