package gate_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/intutic/gate-operator/internal/gate"
)

// The property tests draw random bundles (cluster layers with random rules, enforcement,
// defaultAction, failurePolicy and selectors, some that never compiled; a namespace policy or
// none) and random calls, and check LayeredPolicy against a reference written apart from it.

var (
	propTools = []struct {
		name  string
		input []map[string]any
	}{
		{"Bash", []map[string]any{{"command": "rm -rf /"}, {"command": "ls -la"}, {"command": "echo hi"}, {"command": "lsx"}}},
		{"Read", []map[string]any{{"file_path": "/w/.env"}, {"file_path": "/w/a.go"}}},
		{"Write", []map[string]any{{"file_path": "/w/.env", "content": "x"}, {"file_path": "/w/b.go", "content": "package b"}}},
	}
	propToolPatterns = [][]string{nil, {"bash"}, {"read"}, {"bash", "write"}, {"write"}}
	propWhens        = []string{
		"",
		`input.command.contains("rm")`,
		`input.command.startsWith("ls")`,
		`size(input.command) > 5`,
		`input.file_path.endsWith(".env")`,
		`input.missing == "x"`, // errors on every call: failurePolicy decides
		`caller.pod == "agent-0"`,
	}
	propVerdicts     = []gate.Verdict{gate.Allow, gate.Ask, gate.Block}
	propEnforcements = []gate.Enforcement{"", gate.Enforce, gate.Audit}
	propKeys         = []string{"app", "tier"}
	propValues       = []string{"a", "b"}
)

func randomMeta(rng *rand.Rand, policy string) gate.PolicyMeta {
	fp := gate.Fail
	if rng.Intn(2) == 0 {
		fp = gate.Ignore
	}
	// Allow is the defaultAction of half the policies, so that the layers' rules decide.
	def := gate.Allow
	if rng.Intn(2) == 0 {
		def = propVerdicts[rng.Intn(3)]
	}
	return gate.PolicyMeta{Policy: policy, Generation: 1, DefaultAction: def, FailurePolicy: fp, Enforcement: propEnforcements[rng.Intn(3)]}
}

func randomSnapshot(t testing.TB, rng *rand.Rand, policy string) *gate.Snapshot {
	t.Helper()
	meta := randomMeta(rng, policy)
	if rng.Intn(15) == 0 {
		s, err := gate.BuildInvalidSnapshot(meta, "spec.rules[0].when: does not compile")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var rules []gate.Rule
	for i := range rng.Intn(5) {
		rules = append(rules, gate.Rule{
			Name:        fmt.Sprintf("r%d", i),
			Tools:       propToolPatterns[rng.Intn(len(propToolPatterns))],
			When:        propWhens[rng.Intn(len(propWhens))],
			Action:      propVerdicts[rng.Intn(3)],
			Reason:      fmt.Sprintf("%s rule %d", policy, i),
			Code:        []string{"", "c"}[rng.Intn(2)],
			Enforcement: propEnforcements[rng.Intn(3)],
		})
	}
	s, err := gate.BuildSnapshot(meta, rules)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func randomSelector(rng *rand.Rand) []gate.Requirement {
	var sel []gate.Requirement
	for range rng.Intn(3) {
		r := gate.Requirement{Key: propKeys[rng.Intn(2)], Operator: []string{gate.OperatorIn, gate.OperatorNotIn, gate.OperatorExists, gate.OperatorDoesNotExist}[rng.Intn(4)]}
		if r.Operator == gate.OperatorIn || r.Operator == gate.OperatorNotIn {
			r.Values = []string{propValues[rng.Intn(2)]}
		}
		sel = append(sel, r)
	}
	return sel
}

// propPool is the snapshots the cases draw from, each with the policy the reference decides
// it with, compiled once.
type propPool struct {
	cluster, namespace []*gate.Snapshot
	ref                map[*gate.Snapshot]*gate.Policy
}

func newPropPool(t testing.TB, rng *rand.Rand) *propPool {
	pool := &propPool{ref: map[*gate.Snapshot]*gate.Policy{}}
	for i := range 30 {
		pool.cluster = append(pool.cluster, randomSnapshot(t, rng, fmt.Sprintf("l%02d", i)))
	}
	for i := range 10 {
		pool.namespace = append(pool.namespace, randomSnapshot(t, rng, fmt.Sprintf("team-a/ns%d", i)))
	}
	for _, s := range append(append([]*gate.Snapshot{}, pool.cluster...), pool.namespace...) {
		pool.ref[s], _ = gate.Compile(s)
	}
	return pool
}

// propCase is one random bundle for a pod.
type propCase struct {
	layers  []gate.Layer
	snaps   map[string]*gate.Snapshot
	primary *gate.Snapshot
	labels  map[string]string
}

func (pool *propPool) draw(rng *rand.Rand) propCase {
	c := propCase{snaps: map[string]*gate.Snapshot{}, labels: map[string]string{}}
	for _, i := range rng.Perm(len(pool.cluster))[:rng.Intn(5)] {
		s := pool.cluster[i]
		c.layers = append(c.layers, layerOf(s, int32(rng.Intn(5)-2), randomSelector(rng)...))
		c.snaps[s.Policy] = s
	}
	if rng.Intn(10) < 7 {
		c.primary = pool.namespace[rng.Intn(len(pool.namespace))]
	}
	for _, k := range propKeys {
		if rng.Intn(3) > 0 {
			c.labels[k] = propValues[rng.Intn(2)]
		}
	}
	return c
}

func (c propCase) layerSet(t testing.TB, namespaced bool) *gate.LayerSet {
	t.Helper()
	idx, _ := mustIndex(t, gate.LayersIndex{Namespace: "team-a", Namespaced: namespaced, Layers: c.layers})
	primary := c.primary
	if !namespaced {
		primary = nil
	}
	set, err := gate.NewLayerSet(idx, primary, c.snaps, c.labels)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// reference decides a call as the combination is specified, from each layer's own
// Policy.Decide: layers chosen with apimachinery's selectors, in (priority, name) order, the
// namespace's last; the strictest verdict, the first among equals; the strictest unenforced
// verdict stricter than that, the first among equals.
func (pool *propPool) reference(t testing.TB, c propCase, call *gate.Call) gate.Decision {
	t.Helper()
	ops := map[string]selection.Operator{gate.OperatorIn: selection.In, gate.OperatorNotIn: selection.NotIn, gate.OperatorExists: selection.Exists, gate.OperatorDoesNotExist: selection.DoesNotExist}
	var chosen []gate.Layer
	for _, l := range c.layers {
		sel := labels.NewSelector()
		for _, r := range l.PodSelector {
			req, err := labels.NewRequirement(r.Key, ops[r.Operator], r.Values)
			if err != nil {
				t.Fatal(err)
			}
			sel = sel.Add(*req)
		}
		if sel.Matches(labels.Set(c.labels)) {
			chosen = append(chosen, l)
		}
	}
	sort.Slice(chosen, func(i, j int) bool {
		if chosen[i].Priority != chosen[j].Priority {
			return chosen[i].Priority < chosen[j].Priority
		}
		return chosen[i].Name < chosen[j].Name
	})
	type decided struct {
		id string
		d  gate.Decision
	}
	var ds []decided
	for _, l := range chosen {
		ds = append(ds, decided{"ClusterHarnessAgentPolicy/" + l.Name, pool.ref[c.snaps[l.Name]].Decide(call)})
	}
	if c.primary != nil {
		ds = append(ds, decided{"HarnessAgentPolicy/" + c.primary.Policy, pool.ref[c.primary].Decide(call)})
	}
	if len(ds) == 0 {
		return gate.Decision{Verdict: gate.Block, Reason: "no policy selects this pod", Code: "no_policy", Message: gate.RefusalPrefix + "no policy selects this pod"}
	}
	rank := map[gate.Verdict]int{gate.Allow: 0, gate.Ask: 1, gate.Block: 2}
	best := 0
	for i := 1; i < len(ds); i++ {
		if rank[ds[i].d.Verdict] > rank[ds[best].d.Verdict] {
			best = i
		}
	}
	out := ds[best].d
	out.Layer, out.Would = ds[best].id, nil
	for _, x := range ds {
		if w := x.d.Would; w != nil && rank[w.Verdict] > rank[out.Verdict] && (out.Would == nil || rank[w.Verdict] > rank[out.Would.Verdict]) {
			out.Would = w
		}
		out.Layers = append(out.Layers, gate.LayerVerdict{Layer: x.id, Verdict: x.d.Verdict, Rule: x.d.Rule, Code: x.d.Code, SnapshotDigest: x.d.SnapshotDigest, Would: x.d.Would})
	}
	return out
}

func withoutIncident(d gate.Decision) gate.Decision {
	d.IncidentID = ""
	return d
}

func randomCall(rng *rand.Rand) *gate.Call {
	tool := propTools[rng.Intn(len(propTools))]
	return &gate.Call{Tool: tool.name, Input: tool.input[rng.Intn(len(tool.input))], Surface: gate.SurfaceHook, Caller: gate.Caller{Pod: []string{"agent-0", "agent-1"}[rng.Intn(2)]}}
}

// TestLayeredDecideMatchesReference: over 2000 random bundles, and three calls each, the
// layered decision is the reference's, incident ID aside; a decision made without CEL is the
// one Decide makes.
func TestLayeredDecideMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(25))
	pool := newPropPool(t, rng)
	verdicts, withoutCEL, layered := map[gate.Verdict]int{}, 0, 0
	for n := range 2000 {
		c := pool.draw(rng)
		set := c.layerSet(t, c.primary != nil)
		tool := propTools[rng.Intn(len(propTools))].name
		lp := set.CompileFor(tool, "")
		if n%4 == 0 {
			lp = set.Compile()
		}
		for range 3 {
			call := randomCall(rng)
			call.Tool = tool
			for _, tt := range propTools {
				if tt.name == tool {
					call.Input = tt.input[rng.Intn(len(tt.input))]
				}
			}
			got, want := withoutIncident(lp.Decide(call)), withoutIncident(pool.reference(t, c, call))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("case %d, %s %v, layers %q:\n got %+v\nwant %+v", n, call.Tool, call.Input, set.Layers(), got, want)
			}
			verdicts[got.Verdict]++
			if len(got.Layers) > 1 {
				layered++
			}
			if d, ok := lp.DecideWithoutCEL(call); ok {
				withoutCEL++
				if d = withoutIncident(d); !reflect.DeepEqual(d, got) {
					t.Fatalf("case %d: without CEL %+v, Decide %+v", n, d, got)
				}
			}
		}
	}
	t.Logf("verdicts %v, %d decisions of several layers, %d decided without CEL", verdicts, layered, withoutCEL)
	if verdicts[gate.Allow] < 300 || verdicts[gate.Ask] < 300 || verdicts[gate.Block] < 300 || layered < 1000 || withoutCEL < 500 {
		t.Fatalf("the cases do not exercise the combination: verdicts %v, %d of several layers, %d without CEL", verdicts, layered, withoutCEL)
	}
}

// TestNamespaceLayerIsMonotone: adding the namespace's policy to the cluster layers that
// select a pod never lowers the verdict (a Block stays a Block, an Ask never becomes an
// Allow). With no cluster layer selected the pod had no policy at all (no_policy), which the
// namespace's policy replaces, so those cases are left out.
func TestNamespaceLayerIsMonotone(t *testing.T) {
	rng := rand.New(rand.NewSource(26))
	pool := newPropPool(t, rng)
	rank := map[gate.Verdict]int{gate.Allow: 0, gate.Ask: 1, gate.Block: 2}
	checked, raised := 0, 0
	for n := 0; checked < 2000; n++ {
		c := pool.draw(rng)
		if c.primary == nil {
			c.primary = pool.namespace[rng.Intn(len(pool.namespace))]
		}
		without := c.layerSet(t, false)
		if len(without.Layers()) == 0 {
			continue
		}
		call := randomCall(rng)
		before := without.Compile().Decide(call)
		after := c.layerSet(t, true).Compile().Decide(call)
		if rank[after.Verdict] < rank[before.Verdict] {
			t.Fatalf("case %d: the namespace layer turned %s into %s (%+v)", n, before.Verdict, after.Verdict, after)
		}
		if before.Verdict == gate.Block && (after.Layer != before.Layer || after.Rule != before.Rule || after.Code != before.Code) {
			t.Fatalf("case %d: the namespace layer changed the Block of %s: %+v", n, before.Layer, after)
		}
		if rank[after.Verdict] > rank[before.Verdict] {
			raised++
		}
		checked++
	}
	if raised < 100 {
		t.Fatalf("only %d of 2000 cases were made stricter by the namespace layer", raised)
	}
}
