package gate_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/intutic/gate-operator/internal/gate"
)

// propNow is the clock of the exception property test: half its exceptions expire before it.
var propNow = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

// randomExceptions draws a layer's exceptions: rules of the pool's (r0..r4) and one no
// snapshot has, tools as the pool's rules have them, selectors, expiresAt either side of
// propNow (or exactly at it, which has expired), half of them after.
func randomExceptions(rng *rand.Rand) []gate.Exception {
	var es []gate.Exception
	for i := range rng.Intn(4) {
		e := gate.Exception{Name: fmt.Sprintf("ex-%d", i), Tools: propToolPatterns[rng.Intn(len(propToolPatterns))]}
		for _, r := range rng.Perm(6)[:1+rng.Intn(2)] {
			e.Rules = append(e.Rules, fmt.Sprintf("r%d", r)) // r5: no snapshot has it
		}
		if rng.Intn(3) == 0 {
			e.PodSelector = randomSelector(rng)
		}
		e.ExpiresAt = propNow.Add(time.Duration(rng.Intn(4)-1) * time.Minute).Format(time.RFC3339)
		es = append(es, e)
	}
	return es
}

// exceptionReference decides one layer as exceptions are specified: the snapshot rebuilt
// without the rules of the exceptions that apply (expiresAt after propNow, the tool among
// their patterns, the pod selected by apimachinery's selector), decided by Policy.Decide.
func exceptionReference(t testing.TB, s *gate.Snapshot, es []gate.Exception, podLabels map[string]string, call *gate.Call) (gate.Decision, []string) {
	t.Helper()
	ops := map[string]selection.Operator{gate.OperatorIn: selection.In, gate.OperatorNotIn: selection.NotIn, gate.OperatorExists: selection.Exists, gate.OperatorDoesNotExist: selection.DoesNotExist}
	lifted := map[string]bool{}
	for _, e := range es {
		exp, _ := time.Parse(time.RFC3339, e.ExpiresAt)
		if !exp.After(propNow) || len(e.Tools) > 0 && !slices.Contains(e.Tools, strings.ToLower(call.Tool)) {
			continue
		}
		sel := labels.NewSelector()
		for _, r := range e.PodSelector {
			req, err := labels.NewRequirement(r.Key, ops[r.Operator], r.Values)
			if err != nil {
				t.Fatal(err)
			}
			sel = sel.Add(*req)
		}
		if !sel.Matches(labels.Set(podLabels)) {
			continue
		}
		for _, r := range e.Rules {
			lifted[r] = true
		}
	}
	var rules []gate.Rule
	var names []string
	for _, r := range s.Rules {
		if lifted[r.Name] {
			names = append(names, r.Name)
		} else {
			rules = append(rules, r)
		}
	}
	if len(names) == 0 || s.Invalid != "" {
		p, _ := gate.Compile(s)
		return p.Decide(call), nil
	}
	// The pool's rules never read caller.namespace, so a cluster layer decided on its own (with
	// no namespace) is decided as in its bundle, as the layered reference has it too.
	meta := gate.PolicyMeta{Policy: s.Policy, Generation: s.Generation, DefaultAction: s.DefaultAction, FailurePolicy: s.FailurePolicy, Enforcement: s.Enforcement}
	without, err := gate.BuildSnapshot(meta, rules)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := gate.Compile(without)
	return p.Decide(call), names
}

// TestExceptionsMatchReference: over 3000 random bundles with random exceptions, each layer's
// decision is the reference's (its snapshot without the lifted rules); no lifted rule decides
// or is recorded; a layer names exceptions exactly when they changed its decision; exceptions
// that lift only Block rules never make a decision stricter; and DecideWithoutCEL agrees.
func TestExceptionsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewSource(27))
	pool := newPropPool(t, rng)
	rank := map[gate.Verdict]int{gate.Allow: 0, gate.Ask: 1, gate.Block: 2}
	changedLayers, liftedLayers, withoutCEL := 0, 0, 0
	for n := range 3000 {
		c := pool.draw(rng)
		exceptions := map[string][]gate.Exception{}
		for i := range c.layers {
			c.layers[i].Exceptions = randomExceptions(rng)
			exceptions[c.layers[i].Name] = c.layers[i].Exceptions
		}
		nsEx := randomExceptions(rng)
		idx, _ := mustIndex(t, gate.LayersIndex{Namespace: "team-a", Namespaced: c.primary != nil, Layers: c.layers, Exceptions: nsEx})
		set, err := gate.NewLayerSet(idx, c.primary, c.snaps, c.labels)
		if err != nil {
			t.Fatal(err)
		}
		call := randomCall(rng)
		lp := set.CompileFor(call.Tool, "")
		if n%3 == 0 {
			lp = set.Compile()
		}
		gate.SetClock(lp, func() time.Time { return propNow })
		got := lp.Decide(call)
		for i, lv := range got.Layers {
			var s *gate.Snapshot
			var es []gate.Exception
			if name, ok := strings.CutPrefix(lv.Layer, gate.LayerKindCluster+"/"); ok {
				s, es = c.snaps[name], exceptions[name]
			} else {
				s, es = c.primary, nsEx
			}
			want, lifted := exceptionReference(t, s, es, c.labels, call)
			if lv.Verdict != want.Verdict || lv.Rule != want.Rule || lv.Code != want.Code || !reflect.DeepEqual(lv.Would, want.Would) {
				t.Fatalf("case %d, layer %d %s, %s %v, lifting %q:\n got %+v\nwant %+v", n, i, lv.Layer, call.Tool, call.Input, lifted, lv, want)
			}
			if slices.Contains(lifted, lv.Rule) || lv.Would != nil && slices.Contains(lifted, lv.Would.Rule) {
				t.Fatalf("case %d: lifted rule decided: %+v", n, lv)
			}
			p, _ := gate.Compile(s)
			unlifted := p.Decide(call)
			differs := unlifted.Verdict != want.Verdict || unlifted.Rule != want.Rule || unlifted.Code != want.Code || !reflect.DeepEqual(unlifted.Would, want.Would)
			if differs != (len(lv.Exceptions) > 0) {
				t.Fatalf("case %d: layer %s changed %v, named %q (unlifted %+v)", n, lv.Layer, differs, lv.Exceptions, unlifted)
			}
			if len(lifted) > 0 {
				liftedLayers++
			}
			if differs {
				changedLayers++
				onlyBlock := true
				for _, r := range s.Rules {
					if slices.Contains(lifted, r.Name) && r.Action != gate.Block {
						onlyBlock = false
					}
				}
				if onlyBlock && rank[want.Verdict] > rank[unlifted.Verdict] {
					t.Fatalf("case %d: lifting Block rules made %s stricter: %+v", n, lv.Layer, lv)
				}
			}
		}
		if i := slices.IndexFunc(got.Layers, func(l gate.LayerVerdict) bool { return l.Layer == got.Layer }); i >= 0 && !slices.Equal(got.Exceptions, got.Layers[i].Exceptions) {
			t.Fatalf("case %d: the decision names %q, its layer %q", n, got.Exceptions, got.Layers[i].Exceptions)
		}
		if d, ok := lp.DecideWithoutCEL(call); ok {
			withoutCEL++
			if !reflect.DeepEqual(withoutIncident(d), withoutIncident(got)) {
				t.Fatalf("case %d: without CEL %+v, Decide %+v", n, d, got)
			}
		}
	}
	t.Logf("%d layers with rules lifted, %d decisions changed, %d decided without CEL", liftedLayers, changedLayers, withoutCEL)
	if liftedLayers < 600 || changedLayers < 120 || withoutCEL < 800 {
		t.Fatalf("the cases do not exercise exceptions: %d lifted, %d changed, %d without CEL", liftedLayers, changedLayers, withoutCEL)
	}
}
