package gate

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// exceptionBundle is a bundle with a cluster layer "baseline" (blocks curl and wget) and the
// namespace policy team-a/agents (blocks curl too, allows the rest), with these exceptions of
// the baseline and of the namespace policy.
func exceptionBundle(t *testing.T, baseline, own []Exception) (*LayersIndex, *Snapshot, map[string]*Snapshot) {
	t.Helper()
	primary, err := BuildSnapshot(PolicyMeta{Policy: "team-a/agents", Generation: 1}, []Rule{
		{Name: "no-curl", Tools: []string{"bash"}, When: `input.command.startsWith("curl")`, Action: Block, Reason: "the namespace forbids curl"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := BuildSnapshot(PolicyMeta{Policy: "baseline", Generation: 1}, []Rule{
		{Name: "no-curl", Tools: []string{"bash"}, When: `input.command.startsWith("curl")`, Action: Block, Reason: "the platform forbids curl"},
		{Name: "no-wget", Tools: []string{"bash"}, When: `input.command.startsWith("wget")`, Action: Block, Reason: "the platform forbids wget"},
		{Name: "read-asks", Tools: []string{"read"}, Action: Ask, Reason: "reads need a human"},
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := BuildLayersIndex(LayersIndex{Namespace: "team-a", Namespaced: true, Exceptions: own, Layers: []Layer{{
		Kind: LayerKindCluster, Name: "baseline", File: ClusterLayerFile("baseline"), Digest: cluster.Digest, Exceptions: baseline,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := LoadLayersIndex(raw, "")
	if err != nil {
		t.Fatal(err)
	}
	return idx, primary, map[string]*Snapshot{"baseline": cluster}
}

func bash(command string) *Call {
	return &Call{Tool: "Bash", Input: map[string]any{"command": command}, Surface: SurfaceHook}
}

// at decides with the set at a fixed time, with Decide and, where it decides, DecideWithoutCEL
// (which must agree).
func at(t *testing.T, set *LayerSet, now time.Time, c *Call) Decision {
	t.Helper()
	lp := set.Compile()
	lp.now = func() time.Time { return now }
	d := lp.Decide(c)
	if w, ok := lp.DecideWithoutCEL(c); ok && (w.Verdict != d.Verdict || w.Rule != d.Rule || w.Layer != d.Layer || !slices.Equal(w.Exceptions, d.Exceptions)) {
		t.Errorf("DecideWithoutCEL %s by %s %s %v, Decide %s by %s %s %v", w.Verdict, w.Layer, w.Rule, w.Exceptions, d.Verdict, d.Layer, d.Rule, d.Exceptions)
	}
	return d
}

// TestExceptionLiftsItsRuleUntilItExpires: an exception lifts exactly the rules it names, of
// its own layer only, for the calls it covers, and stops at expiresAt by the gate's own clock,
// also in a policy compiled before then.
func TestExceptionLiftsItsRuleUntilItExpires(t *testing.T) {
	expires := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	before, after := expires.Add(-time.Second), expires
	idx, primary, layers := exceptionBundle(t, []Exception{{Name: "wget-ok", Rules: []string{"no-wget"}, ExpiresAt: expires.Format(time.RFC3339)}}, nil)
	set, err := NewLayerSet(idx, primary, layers, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := at(t, set, before, bash("wget https://example.com")); d.Verdict != Allow || !slices.Equal(d.Exceptions, []string{"wget-ok"}) {
		// Without the exception the baseline would block: the decision names it.
		t.Errorf("an excepted wget before expiresAt: %s by %s %s %v", d.Verdict, d.Layer, d.Rule, d.Exceptions)
	} else if l := d.Layers[0]; l.Verdict != Allow || !slices.Equal(l.Exceptions, []string{"wget-ok"}) {
		t.Errorf("the baseline's own decision: %+v, want Allow naming the exception", l)
	}
	if d := at(t, set, after, bash("wget https://example.com")); d.Verdict != Block || d.Rule != "no-wget" || len(d.Exceptions) != 0 {
		t.Errorf("at expiresAt: %s by %s %s %v, want the baseline's Block", d.Verdict, d.Layer, d.Rule, d.Exceptions)
	}
	if d := at(t, set, before, bash("curl https://example.com")); d.Verdict != Block || d.Rule != "no-curl" || d.Layer != "ClusterHarnessAgentPolicy/baseline" {
		t.Errorf("a rule the exception does not name: %s by %s %s", d.Verdict, d.Layer, d.Rule)
	}

	// The namespace policy's own exception of no-curl leaves the baseline's no-curl standing.
	idx, primary, layers = exceptionBundle(t, nil, []Exception{{Name: "curl-ok", Rules: []string{"no-curl"}, ExpiresAt: expires.Format(time.RFC3339)}})
	set, err = NewLayerSet(idx, primary, layers, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := at(t, set, before, bash("curl https://example.com"))
	if d.Verdict != Block || d.Layer != "ClusterHarnessAgentPolicy/baseline" || len(d.Exceptions) != 0 {
		t.Errorf("a namespace exception against the baseline's rule of the same name: %s by %s %v", d.Verdict, d.Layer, d.Exceptions)
	}
	if l := d.Layers[1]; l.Verdict != Allow || !slices.Equal(l.Exceptions, []string{"curl-ok"}) {
		t.Errorf("the namespace layer's own decision: %+v", l)
	}
}

// TestExceptionScope: tools and pod selectors narrow an exception; on a surface without a pod
// only an exception without a pod selector applies; an exception that changes nothing is not
// named.
func TestExceptionScope(t *testing.T) {
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	excs := []Exception{
		{Name: "reads-for-tier-b", Rules: []string{"read-asks"}, Tools: []string{"Read"}, PodSelector: []Requirement{{Key: "tier", Operator: OperatorIn, Values: []string{"b"}}}, ExpiresAt: expires},
		{Name: "wget-by-read", Rules: []string{"no-wget"}, Tools: []string{"Read"}, ExpiresAt: expires},
		{Name: "wget-anywhere", Rules: []string{"no-wget"}, ExpiresAt: expires},
	}
	idx, primary, layers := exceptionBundle(t, excs, nil)
	read := &Call{Tool: "Read", Input: map[string]any{"file_path": "/workspace/a"}, Surface: SurfaceHook}
	now := time.Now()

	tierA, err := NewLayerSet(idx, primary, layers, map[string]string{"tier": "a"})
	if err != nil {
		t.Fatal(err)
	}
	if d := at(t, tierA, now, read); d.Verdict != Ask {
		t.Errorf("a read of a pod the exception does not select: %s", d.Verdict)
	}
	tierB, err := NewLayerSet(idx, primary, layers, map[string]string{"tier": "b"})
	if err != nil {
		t.Fatal(err)
	}
	if d := at(t, tierB, now, read); d.Verdict != Allow || !slices.Equal(d.Layers[0].Exceptions, []string{"reads-for-tier-b"}) {
		t.Errorf("a read of a selected pod: %s, layers %+v", d.Verdict, d.Layers)
	}
	// wget-by-read covers only Read, so wget-anywhere alone is what changed the Bash call.
	if d := at(t, tierB, now, bash("wget x")); d.Verdict != Allow || !slices.Equal(d.Layers[0].Exceptions, []string{"wget-anywhere"}) {
		t.Errorf("wget: %s, layers %+v", d.Verdict, d.Layers)
	}
	// An exception that lifts a rule the call does not reach changes nothing and is not named.
	if d := at(t, tierB, now, bash("ls")); d.Verdict != Allow || len(d.Layers[0].Exceptions) != 0 {
		t.Errorf("a call no lifted rule decides: %+v", d.Layers[0])
	}

	noPod, err := NewLayerSetNoPod(idx, primary, layers)
	if err != nil {
		t.Fatal(err)
	}
	if d := at(t, noPod, now, read); d.Verdict != Ask {
		t.Errorf("a surface without a pod honoured an exception with a pod selector: %s", d.Verdict)
	}
	if d := at(t, noPod, now, bash("wget x")); d.Verdict != Allow {
		t.Errorf("a surface without a pod did not honour an exception without a pod selector: %s", d.Verdict)
	}
}

// TestExceptionsInTheIndex: exceptions are canonical in the index, covered by its digest, and
// refused when malformed.
func TestExceptionsInTheIndex(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	layer := func(es ...Exception) LayersIndex {
		return LayersIndex{Namespace: "team-a", Namespaced: true, Layers: []Layer{{Kind: LayerKindCluster, Name: "baseline", File: ClusterLayerFile("baseline"), Digest: digest, Exceptions: es}}}
	}
	ok := Exception{Name: "b", Rules: []string{"z-rule", "a-rule", "a-rule"}, Tools: []string{"Read", "Bash"}, ExpiresAt: "2026-12-05T12:00:00Z"}
	raw, err := BuildLayersIndex(layer(ok, Exception{Name: "a", Rules: []string{"r"}, ExpiresAt: "2026-12-05T12:00:00Z"}))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := LoadLayersIndex(raw, "")
	if err != nil {
		t.Fatal(err)
	}
	es := idx.Layers[0].Exceptions
	if len(es) != 2 || es[0].Name != "a" || !slices.Equal(es[1].Rules, []string{"a-rule", "z-rule"}) || !slices.Equal(es[1].Tools, []string{"Bash", "Read"}) {
		t.Fatalf("not canonical: %+v", es)
	}
	tampered := strings.Replace(string(raw), "2026-12-05T12:00:00Z", "2027-12-05T12:00:00Z", 1)
	if _, err := LoadLayersIndex([]byte(tampered), ""); err == nil {
		t.Error("an index whose exception's expiry was changed verifies")
	}
	for name, e := range map[string]Exception{
		"no rules":        {Name: "x", ExpiresAt: "2026-12-05T12:00:00Z"},
		"a bad rule name": {Name: "x", Rules: []string{"Not_A_Label"}, ExpiresAt: "2026-12-05T12:00:00Z"},
		"a local time":    {Name: "x", Rules: []string{"r"}, ExpiresAt: "2026-12-05T12:00:00+01:00"},
		"no expiry":       {Name: "x", Rules: []string{"r"}},
		"a bad tool":      {Name: "x", Rules: []string{"r"}, Tools: []string{"mcp__["}, ExpiresAt: "2026-12-05T12:00:00Z"},
		"a bad selector":  {Name: "x", Rules: []string{"r"}, PodSelector: []Requirement{{Key: "tier", Operator: "Near"}}, ExpiresAt: "2026-12-05T12:00:00Z"},
		"a bad name":      {Name: "Not A Name", Rules: []string{"r"}, ExpiresAt: "2026-12-05T12:00:00Z"},
	} {
		if _, err := BuildLayersIndex(layer(e)); err == nil {
			t.Errorf("%s: the index was built", name)
		}
	}
	if _, err := BuildLayersIndex(layer(Exception{Name: "x", Rules: []string{"r"}, ExpiresAt: "2026-12-05T12:00:00Z"}, Exception{Name: "x", Rules: []string{"s"}, ExpiresAt: "2026-12-05T12:00:00Z"})); err == nil {
		t.Error("two exceptions of one name were built")
	}
}
