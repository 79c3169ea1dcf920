package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	gatelib "github.com/intutic/gate-operator/internal/gate"
)

// explain prints what governs a pod: the bundle its hook reads, the layers that decide its
// calls in the order they are combined (each cluster policy that selects it by priority, then
// its namespace policy), the layers of the bundle that do not select it, the exceptions that
// apply to it with the time they have left (by now), and its egress; with
// tool, the verdict of every layer on that call and the result, decided by the gate itself from
// the bundle as the pod's hook reads it (no rule is re-implemented here).
func explain(ctx context.Context, c client.Client, key client.ObjectKey, tool, input string, now time.Time, stdout io.Writer) error {
	pod := &corev1.Pod{}
	if err := c.Get(ctx, key, pod); err != nil {
		return err
	}
	cm, err := bundleOf(ctx, c, pod)
	if err != nil {
		return err
	}
	set, unselected, err := layersOf(cm, pod.Labels)
	if err != nil {
		return fmt.Errorf("the bundle %s of pod %s does not load as its hook would read it, so every call of the pod is refused: %w", cm.Name, pod.Name, err)
	}
	fmt.Fprintf(stdout, "Pod:       %s/%s\n", pod.Namespace, pod.Name)
	fmt.Fprintf(stdout, "Bundle:    ConfigMap %s (%s)\n", cm.Name, orNone(cm.Data["bootstrap-hash"]))
	if err := printLayers(stdout, set, unselected, now); err != nil {
		return err
	}
	if policy := cm.Labels[gatev1.LabelPolicy]; policy != "" {
		p := &gatev1.HarnessAgentPolicy{}
		switch err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: policy}, p); {
		case err == nil && p.Status.Egress != nil:
			fmt.Fprintf(stdout, "Egress:    %s, NetworkPolicy %s (%d addresses allowed)\n", p.Status.Egress.Mode, p.Status.NetworkPolicy, p.Status.Egress.Addresses)
			if eg := p.Status.Egress; len(eg.Ceilings) > 0 {
				fmt.Fprintf(stdout, "Ceiling:   %s", strings.Join(eg.Ceilings, ", "))
				if len(eg.OutsideCeiling) > 0 {
					fmt.Fprintf(stdout, " (leaves out %s)", strings.Join(eg.OutsideCeiling, ", "))
				}
				fmt.Fprintln(stdout)
			}
		case err != nil && !apierrors.IsNotFound(err):
			return err
		}
	}
	if tool == "" {
		return nil
	}
	return explainCall(stdout, set, pod.Name, tool, input)
}

// printLayers prints the layers that apply, those that do not select the pod, and the
// exceptions that apply with the time they have left.
func printLayers(stdout io.Writer, set *layerSet, unselected []gatelib.Layer, now time.Time) error {
	fmt.Fprintln(stdout, "Layers, in the order they are combined (the most restrictive verdict wins):")
	w := tabwriter.NewWriter(stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "  #\tLAYER\tRULES\tDEFAULT\tENFORCEMENT\tSNAPSHOT")
	for i, l := range set.layers {
		fmt.Fprintf(w, "  %d\t%s\t%d\t%s\t%s\t%s\n", i+1, l.id, len(l.snap.Rules), l.snap.DefaultAction, l.snap.Mode(), shortDigest(l.snap.Digest))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, l := range unselected {
		fmt.Fprintf(stdout, "Not selecting this pod: %s (podSelector %s)\n", l.ID(), requirements(l.PodSelector))
	}
	for _, e := range set.exceptions {
		left := "expired: no longer honoured"
		if at, err := time.Parse(time.RFC3339, e.ExpiresAt); err == nil && at.After(now) {
			left = duration.HumanDuration(at.Sub(now)) + " left"
		}
		tools := "every tool"
		if len(e.Tools) > 0 {
			tools = strings.Join(e.Tools, ", ")
		}
		fmt.Fprintf(stdout, "Exception: %s lifts %s of %s for %s until %s (%s)\n", e.Name, strings.Join(e.Rules, ", "), e.layer, tools, e.ExpiresAt, left)
	}
	return nil
}

// explainCall decides one call with the set and prints every layer's verdict and the result.
func explainCall(stdout io.Writer, set *layerSet, pod, tool, input string) error {
	var raw any = map[string]any{}
	if input != "" {
		if err := json.Unmarshal([]byte(input), &raw); err != nil {
			return fmt.Errorf("--input is not JSON: %w", err)
		}
	}
	rendered, err := gatelib.RenderInput(raw)
	if err != nil {
		return fmt.Errorf("--input: %w", err)
	}
	d := set.policy.Decide(&gatelib.Call{Tool: tool, Input: rendered, Surface: gatelib.SurfaceHook, Caller: gatelib.Caller{Pod: pod}})
	fmt.Fprintf(stdout, "Call:      %s %s\n", tool, input)
	w := tabwriter.NewWriter(stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "  LAYER\tVERDICT\tRULE\tCODE\tEXCEPTIONS")
	for _, l := range d.Layers {
		verdict := string(l.Verdict)
		if l.Would != nil {
			verdict += " (would " + strings.ToLower(string(l.Would.Verdict)) + ")"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", l.Layer, verdict, orNone(l.Rule), orNone(l.Code), orNone(strings.Join(l.Exceptions, ",")))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Result:    %s by %s, rule %s: %s\n", d.Verdict, orNone(d.Layer), orNone(d.Rule), d.Reason)
	return nil
}

// bundleOf finds the bootstrap ConfigMap a pod's hook reads: the ConfigMap of its projected
// volumes that holds a policy snapshot.
func bundleOf(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.ConfigMap, error) {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ConfigMap == nil {
				continue
			}
			cm := &corev1.ConfigMap{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: src.ConfigMap.Name}, cm); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			if _, ok := cm.Data[gatelib.SnapshotFileName]; ok {
				return cm, nil
			}
		}
	}
	return nil, fmt.Errorf("pod %s/%s mounts no gate-operator bundle: no gate decides its calls", pod.Namespace, pod.Name)
}

// layerSet is the layers of a bundle that decide a pod's calls, and their policy.
type layerSet struct {
	layers []explainedLayer
	policy interface {
		Decide(*gatelib.Call) gatelib.Decision
	}
	// exceptions are those of the bundle that select the pod, with the layer they lift rules of.
	exceptions []explainedException
}

type explainedException struct {
	gatelib.Exception
	layer string
}

type explainedLayer struct {
	id   string
	snap *gatelib.Snapshot
}

// layersOf loads a bundle's layers for a pod with these labels, with the gate's own loaders:
// a bundle without a layers index is its namespace policy alone.
func layersOf(cm *corev1.ConfigMap, labels map[string]string) (*layerSet, []gatelib.Layer, error) {
	raw, layered := cm.Data[gatelib.LayersFileName]
	if !layered {
		primary, err := gatelib.LoadSnapshot([]byte(cm.Data[gatelib.SnapshotFileName]), "")
		if err != nil {
			return nil, nil, err
		}
		p, _ := gatelib.Compile(primary)
		ns := &layerSet{layers: []explainedLayer{{id: gatelib.LayerKindNamespace + "/" + primary.Policy, snap: primary}}, policy: layeredOne{p}}
		return ns, nil, nil
	}
	idx, err := gatelib.LoadLayersIndex([]byte(raw), "")
	if err != nil {
		return nil, nil, err
	}
	// A baseline bundle (no namespace policy) has no snapshot of its own to read, as its hook
	// does not read one.
	var primary *gatelib.Snapshot
	if idx.Namespaced {
		if primary, err = gatelib.LoadSnapshot([]byte(cm.Data[gatelib.SnapshotFileName]), ""); err != nil {
			return nil, nil, err
		}
	}
	snaps := map[string]*gatelib.Snapshot{}
	var unselected []gatelib.Layer
	out := &layerSet{}
	for _, l := range idx.Layers {
		if !l.Selects(labels) {
			unselected = append(unselected, l)
			continue
		}
		s, err := gatelib.LoadSnapshot([]byte(cm.Data[l.File]), "")
		if err != nil {
			return nil, nil, fmt.Errorf("layer %s: %w", l.Name, err)
		}
		snaps[l.Name] = s
		out.layers = append(out.layers, explainedLayer{id: l.ID(), snap: s})
		out.exceptions = append(out.exceptions, podExceptions(l.Exceptions, l.ID(), labels)...)
	}
	set, err := gatelib.NewLayerSet(idx, primary, snaps, labels)
	if err != nil {
		return nil, nil, err
	}
	if idx.Namespaced {
		id := gatelib.LayerKindNamespace + "/" + primary.Policy
		out.layers = append(out.layers, explainedLayer{id: id, snap: primary})
		out.exceptions = append(out.exceptions, podExceptions(idx.Exceptions, id, labels)...)
	}
	out.policy = set.Compile()
	return out, unselected, nil
}

// layeredOne decides with one policy as a layered one would report it: the decision names its
// one layer.
type layeredOne struct{ p *gatelib.Policy }

func (l layeredOne) Decide(c *gatelib.Call) gatelib.Decision {
	d := l.p.Decide(c)
	id := gatelib.LayerKindNamespace + "/" + l.p.Snapshot().Policy
	return gatelib.Combine([]gatelib.LayerDecision{{Layer: id, Decision: d}})
}

// podExceptions are the exceptions of a layer that select a pod with these labels.
func podExceptions(es []gatelib.Exception, layer string, labels map[string]string) []explainedException {
	var out []explainedException
	for _, e := range es {
		if e.Selects(labels) {
			out = append(out, explainedException{Exception: e, layer: layer})
		}
	}
	return out
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

func requirements(reqs []gatelib.Requirement) string {
	parts := make([]string, 0, len(reqs))
	for _, r := range reqs {
		switch r.Operator {
		case gatelib.OperatorExists:
			parts = append(parts, r.Key)
		case gatelib.OperatorDoesNotExist:
			parts = append(parts, "!"+r.Key)
		default:
			parts = append(parts, fmt.Sprintf("%s %s (%s)", r.Key, strings.ToLower(r.Operator), strings.Join(r.Values, ",")))
		}
	}
	return strings.Join(parts, ", ")
}
