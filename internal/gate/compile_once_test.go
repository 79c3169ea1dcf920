package gate

import "testing"

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
