package gate

import (
	"fmt"
	"slices"
	"time"

	"github.com/intutic/gate-operator/internal/gate/toolname"
)

// LayerSet is the layers of a bundle that apply to one pod, each a verified snapshot, in the
// order their decisions are combined: the selected cluster layers in report order, then the
// namespace's own policy when the bundle has one.
type LayerSet struct {
	// Index is the bundle's index.
	Index *LayersIndex
	// Caller is the hook's pod, as PodCaller reads it; LoadLayered reads it from the same
	// version of the volume as the snapshots. NewLayerSet leaves it empty.
	Caller Caller
	layers []layerSnapshot
}

// layerSnapshot is one layer of a LayerSet.
type layerSnapshot struct {
	id      string
	snap    *Snapshot
	cluster bool
	// namespace, for a cluster layer, is the bundle's: its rules see it as caller.namespace.
	namespace string
	// exceptions are the layer's exceptions that apply to the pod (all but their expiry and
	// tools, which are judged per call).
	exceptions []Exception
}

// NewLayerSet chooses the layers of a bundle that apply to a pod with these labels and checks
// that each has its snapshot: primary is the namespace's own (used when idx.Namespaced), and
// layers holds cluster layers' snapshots by name (those that do not select the pod need not be
// there). Each selected layer's snapshot must be the one the index names (its digest) and be
// the layer's own policy, so a bundle mixed from two versions is a fault, never a silent
// change of policy. Errors are *SnapshotError naming the layer.
func NewLayerSet(idx *LayersIndex, primary *Snapshot, layers map[string]*Snapshot, labels map[string]string) (*LayerSet, error) {
	return newLayerSet(idx, primary, layers, func(l *Layer) bool { return l.Selects(labels) },
		func(e *Exception) bool { return selects(e.PodSelector, labels) })
}

// NewLayerSetNoPod is NewLayerSet for a surface that has no pod (the Managed Agents confirmer,
// the gate HTTP API): every cluster layer of the index applies, whatever its podSelector, since
// there are no labels to resolve it against. A pod selector never exempts such a surface from a
// baseline that selects its namespace: the safe side is the more restrictive one.
//
// Exceptions are the other way round: lifting a rule is the permissive direction, so only an
// exception without a pod selector applies on such a surface.
func NewLayerSetNoPod(idx *LayersIndex, primary *Snapshot, layers map[string]*Snapshot) (*LayerSet, error) {
	return newLayerSet(idx, primary, layers, func(*Layer) bool { return true },
		func(e *Exception) bool { return len(e.PodSelector) == 0 })
}

func newLayerSet(idx *LayersIndex, primary *Snapshot, layers map[string]*Snapshot, applies func(*Layer) bool, excepts func(*Exception) bool) (*LayerSet, error) {
	podExceptions := func(es []Exception) []Exception {
		var out []Exception
		for i := range es {
			if excepts(&es[i]) {
				out = append(out, es[i])
			}
		}
		return out
	}
	if idx == nil {
		return nil, &SnapshotError{CodeSnapshotMissing, "no policy layers index has been loaded"}
	}
	set := &LayerSet{Index: idx}
	for i := range idx.Layers {
		l := &idx.Layers[i]
		if !applies(l) {
			continue
		}
		s := layers[l.Name]
		switch {
		case s == nil:
			return nil, &SnapshotError{CodeSnapshotMissing, "cluster layer " + l.Name + " has no snapshot (" + l.File + ")"}
		case s.Digest != l.Digest:
			return nil, &SnapshotError{CodeSnapshotUnverified, fmt.Sprintf("the snapshot of cluster layer %s has digest %q, and the layers index says %q", l.Name, s.Digest, l.Digest)}
		case s.Policy != l.Name:
			return nil, &SnapshotError{CodeSnapshotUnverified, fmt.Sprintf("the snapshot of cluster layer %s is of policy %q", l.Name, s.Policy)}
		}
		set.layers = append(set.layers, layerSnapshot{id: l.ID(), snap: s, cluster: true, namespace: idx.Namespace, exceptions: podExceptions(l.Exceptions)})
	}
	if idx.Namespaced {
		if primary == nil {
			return nil, &SnapshotError{CodeSnapshotMissing, "the layers index says namespace " + idx.Namespace + " has a policy, and its snapshot is missing"}
		}
		ns, name := splitPolicy(primary.Policy)
		if ns != idx.Namespace || name == "" {
			return nil, &SnapshotError{CodeSnapshotUnverified, fmt.Sprintf("the namespace's snapshot is of policy %q, not of a policy in namespace %s", primary.Policy, idx.Namespace)}
		}
		set.layers = append(set.layers, layerSnapshot{id: LayerKindNamespace + "/" + primary.Policy, snap: primary, exceptions: podExceptions(idx.Exceptions)})
	}
	return set, nil
}

// Fingerprint identifies what the set decides with: the index's digest and the digest of every
// layer that applies, in order. A surface that reloads the bundle compiles again only when it
// changes (the index does not name the namespace's own snapshot, which changes on its own).
func (s *LayerSet) Fingerprint() string {
	f := s.Index.Digest
	for _, l := range s.layers {
		f += "," + l.snap.Digest
	}
	return f
}

// Layers returns the ids of the layers that apply, in the order they are combined.
func (s *LayerSet) Layers() []string {
	ids := make([]string, len(s.layers))
	for i, l := range s.layers {
		ids[i] = l.id
	}
	return ids
}

// Compile compiles every layer with Compile, for a long-lived gate.
func (s *LayerSet) Compile() *LayeredPolicy {
	return s.compile(func(snap *Snapshot) *Policy { p, _ := Compile(snap); return p })
}

// CompileFor compiles every layer with CompileFor, for one call of a one-shot caller
// (gate-hook). As with one policy, the rules of a layer that do not compile are not fatal:
// its failurePolicy decides when they are reached.
func (s *LayerSet) CompileFor(tool, server string) *LayeredPolicy {
	return s.compile(func(snap *Snapshot) *Policy { p, _ := CompileFor(snap, tool, server); return p })
}

func (s *LayerSet) compile(compile func(*Snapshot) *Policy) *LayeredPolicy {
	lp := &LayeredPolicy{layers: make([]compiledLayer, len(s.layers))}
	recordings := make([]*InputRecording, 0, len(s.layers))
	for i, l := range s.layers {
		p := compile(l.snap)
		if l.cluster {
			// A cluster policy's snapshot names no namespace; its rules see the pod's.
			p.namespace = l.namespace
		}
		cl := compiledLayer{id: l.id, policy: p}
		for _, e := range l.exceptions {
			ce := compiledException{name: e.Name, rules: e.Rules, expires: e.expiresAt()}
			for _, t := range e.Tools {
				pat, _ := toolname.Compile(t) // LoadLayersIndex checked that it compiles
				ce.tools = append(ce.tools, pat)
			}
			cl.exceptions = append(cl.exceptions, ce)
		}
		lp.layers[i] = cl
		recordings = append(recordings, l.snap.RecordInput)
	}
	lp.recordInput = mergeInputRecordings(recordings...)
	return lp
}

// LayeredPolicy decides calls with every layer that applies to a pod and combines their
// decisions (Combine). It is immutable and safe for concurrent use.
//
// A layer's exceptions are judged at each decision, by the gate's own clock: an exception
// applies to a call strictly before its expiresAt and when its tools match the call's, so a
// policy compiled before expiresAt stops honouring it then, whoever updates the bundle or not.
// The rules an applying exception lifts are skipped as if absent; when the layer would have
// decided otherwise without them, its decision names the exceptions that changed it.
type LayeredPolicy struct {
	layers []compiledLayer
	// recordInput is every layer's opt-in to records holding the input, merged.
	recordInput *InputRecording
	// now is the clock exceptions expire by; nil is time.Now.
	now func() time.Time
}

// compiledException is an Exception of a layer, ready to judge per call.
type compiledException struct {
	name    string
	rules   []string
	tools   []toolname.Pattern // none matches every tool
	expires time.Time
}

// applies reports whether the exception covers a call of the tool (its folded name; "" when
// the name does not resolve, which no pattern matches) at now.
func (e *compiledException) applies(toolKey string, now time.Time) bool {
	if !now.Before(e.expires) {
		return false
	}
	if len(e.tools) == 0 {
		return true
	}
	for _, p := range e.tools {
		if toolKey != "" && p.Match(toolKey) {
			return true
		}
	}
	return false
}

// readsCaller reports whether a rule of any layer reads `caller` (Gate.ReadsCaller).
func (lp *LayeredPolicy) readsCaller() bool {
	for _, l := range lp.layers {
		if l.policy.readsCaller {
			return true
		}
	}
	return false
}

type compiledLayer struct {
	id         string
	policy     *Policy
	exceptions []compiledException
}

// decide is the layer's decision of the call, with the exceptions that apply to it at now.
func (l *compiledLayer) decide(c *Call, now time.Time, withoutCEL bool) (Decision, bool) {
	full := func() (Decision, bool) {
		if withoutCEL {
			return l.policy.DecideWithoutCEL(c)
		}
		return l.policy.Decide(c), true
	}
	if len(l.exceptions) == 0 {
		return full()
	}
	key := ""
	if t, err := toolname.Resolve(c.Tool, c.Server); err == nil {
		key = t.Key
	}
	var lifted map[string]bool
	var applying []*compiledException
	for i := range l.exceptions {
		if e := &l.exceptions[i]; e.applies(key, now) {
			if lifted == nil {
				lifted = map[string]bool{}
			}
			for _, r := range e.rules {
				lifted[r] = true
			}
			applying = append(applying, e)
		}
	}
	if lifted == nil {
		return full()
	}
	d, ok := l.policy.decideLifted(c, lifted, withoutCEL)
	if !ok {
		return Decision{}, false
	}
	without, ok := full()
	if !ok {
		return Decision{}, false
	}
	if sameOutcome(d, without) {
		return d, true
	}
	// The exceptions that lifted the rule that decides (or would) without them; all applying
	// ones if the change came another way (a lifted rule that erred, say).
	for _, e := range applying {
		if slices.Contains(e.rules, without.Rule) || without.Would != nil && slices.Contains(e.rules, without.Would.Rule) {
			d.Exceptions = append(d.Exceptions, e.name)
		}
	}
	if len(d.Exceptions) == 0 {
		for _, e := range applying {
			d.Exceptions = append(d.Exceptions, e.name)
		}
	}
	return d, true
}

// sameOutcome reports whether two decisions of a call say the same: verdict, rule, code and
// what was recorded and not enforced.
func sameOutcome(a, b Decision) bool {
	if a.Verdict != b.Verdict || a.Rule != b.Rule || a.Code != b.Code || (a.Would == nil) != (b.Would == nil) {
		return false
	}
	return a.Would == nil || *a.Would == *b.Would
}

func (lp *LayeredPolicy) clock() time.Time {
	if lp.now != nil {
		return lp.now()
	}
	return time.Now()
}

// Decide decides the call with every layer and combines their decisions. With no layer at
// all, the call is refused with no_policy; a panic is a Block with code gate_crashed.
func (lp *LayeredPolicy) Decide(c *Call) (d Decision) {
	defer func() {
		if r := recover(); r != nil {
			d = refusal(CodeGateCrashed, fmt.Sprintf("the gate failed while combining the policies' decisions (%T)", r), "")
		}
	}()
	now := lp.clock()
	ds := make([]LayerDecision, len(lp.layers))
	for i := range lp.layers {
		l := &lp.layers[i]
		ld, _ := l.decide(c, now, false)
		ds[i] = LayerDecision{Layer: l.id, Decision: ld}
	}
	d = Combine(ds)
	d.RecordInput = lp.recordInput
	return d
}

// DecideWithoutCEL decides the call as Decide does when every layer decides it without CEL
// (Policy.DecideWithoutCEL); otherwise it returns false, and the call must be put to a
// LayeredPolicy that evaluates CEL. Every layer is needed even once one blocks: an earlier
// layer may block too, and then it is that one's reason that is given.
func (lp *LayeredPolicy) DecideWithoutCEL(c *Call) (d Decision, decided bool) {
	defer func() {
		if r := recover(); r != nil {
			d, decided = refusal(CodeGateCrashed, fmt.Sprintf("the gate failed while combining the policies' decisions (%T)", r), ""), true
		}
	}()
	now := lp.clock()
	ds := make([]LayerDecision, len(lp.layers))
	for i := range lp.layers {
		l := &lp.layers[i]
		ld, ok := l.decide(c, now, true)
		if !ok {
			return Decision{}, false
		}
		ds[i] = LayerDecision{Layer: l.id, Decision: ld}
	}
	return Combine(ds), true
}

// LayerDecision is one layer's decision of a call, for Combine.
type LayerDecision struct {
	// Layer identifies the layer: "ClusterHarnessAgentPolicy/<name>" or
	// "HarnessAgentPolicy/<ns>/<name>".
	Layer    string
	Decision Decision
}

// Combine combines the decisions of the layers of a call, given in order (cluster layers by
// priority, then name; the namespace's policy last). The most restrictive verdict in effect
// wins (Block > Ask > Allow), and among equals the first layer: its decision is the result,
// rule, reason, code and all, with Layer naming it. A layer cannot weaken another: an Allow,
// even an explicit one, never overrides an Ask or Block of any layer. Would is the most
// restrictive verdict the layers recorded and did not enforce, when it is stricter than the
// result (among equals the first), so a layer in Audit is reported and changes nothing.
// Faults are Blocks of their layer, which Audit never weakens. With no layer, the call is
// refused with no_policy.
func Combine(layers []LayerDecision) Decision {
	if len(layers) == 0 {
		return refusal(CodeNoPolicy, "no policy selects this pod", "")
	}
	decider := 0
	for i := range layers {
		if layers[i].Decision.Verdict.rank() > layers[decider].Decision.Verdict.rank() {
			decider = i
		}
	}
	d := layers[decider].Decision
	d.Layer = layers[decider].Layer
	d.Would = nil
	d.Layers = make([]LayerVerdict, len(layers))
	for i, l := range layers {
		ld := l.Decision
		if w := ld.Would; w != nil && w.Verdict.rank() > d.Verdict.rank() && (d.Would == nil || w.Verdict.rank() > d.Would.Verdict.rank()) {
			cw := *w
			d.Would = &cw
		}
		d.Layers[i] = LayerVerdict{Layer: l.Layer, Verdict: ld.Verdict, Rule: ld.Rule, Code: ld.Code, SnapshotDigest: ld.SnapshotDigest, Would: ld.Would, Exceptions: ld.Exceptions}
	}
	return d
}
