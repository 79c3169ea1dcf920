package gate

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/intutic/gate-operator/internal/gate/toolname"
	"github.com/intutic/gate-operator/internal/strictjson"
)

// A layered bundle: besides the namespace's own snapshot (SnapshotFileName), the bootstrap
// ConfigMap carries the snapshot of every ClusterHarnessAgentPolicy whose namespaceSelector
// selects the namespace, and an index of them (LayersIndex). The hook decides a call with
// every layer that selects its pod (Layer.Selects) and combines their decisions (Combine).
const (
	// LayersFileName is the key of the index in the bootstrap ConfigMap.
	LayersFileName = "policy-layers.json"
	// PodLabelsFile is where the hook's pod finds its own labels: beside the snapshot, as a
	// downwardAPI item (metadata.labels) of the projected volume, like PodNameFile. It is read
	// only when a layer selects pods by label.
	PodLabelsFile = "pod/labels"
	// LayerKindCluster is the kind of a cluster layer, as Layer.Kind and layer ids name it.
	LayerKindCluster = "ClusterHarnessAgentPolicy"
	// LayerKindNamespace is the kind of the namespace's own policy, as layer ids name it.
	LayerKindNamespace = "HarnessAgentPolicy"
	// LayersKind is the kind of the index file.
	LayersKind = "PolicyLayers"
)

// ClusterLayerFile is the key of a cluster layer's snapshot in the bootstrap ConfigMap.
func ClusterLayerFile(name string) string { return "cluster-layer." + name + ".rules" }

// ClusterLayerCheckedFile is the key of a cluster layer's checked rules file, which plays the
// part CheckedFileName plays for the namespace's snapshot; optional.
func ClusterLayerCheckedFile(name string) string { return "cluster-layer." + name + ".checked" }

// LayersIndex is the index of a layered bundle: which cluster layers it carries, whom they
// select, and the digest of each one's snapshot. Digest covers the canonical encoding of every
// other field, as a Snapshot's does (BuildLayersIndex writes it, LoadLayersIndex verifies it).
type LayersIndex struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Namespace is the bundle's namespace: caller.namespace for the rules of cluster layers.
	Namespace   string `json:"namespace"`
	WorkspaceID string `json:"workspaceID,omitempty"`
	// Namespaced says the bundle's own SnapshotFileName is a layer too, decided last.
	Namespaced bool `json:"namespaced"`
	// Layers are the cluster layers, in report order: Priority ascending, then Name.
	Layers []Layer `json:"layers"`
	// Exceptions are the active exceptions of the namespace's own policy, by name.
	Exceptions []Exception `json:"exceptions,omitempty"`
	Digest     string      `json:"digest"`
}

// Exception is an active GateException of the bundle's namespace, as the index carries it
// beside the layer whose rules it lifts: for the calls of the pods it selects to the tools it
// names, those rules match nothing until ExpiresAt, by the gate's own clock (LayeredPolicy).
type Exception struct {
	// Name is the GateException's (its namespace is the index's).
	Name string `json:"name"`
	// Rules are the names of the layer's rules it lifts; sorted, unique.
	Rules []string `json:"rules"`
	// Tools are tool patterns as rules have them (toolname.Compile); none is every tool.
	Tools []string `json:"tools,omitempty"`
	// PodSelector is ANDed; none selects every pod. The surfaces without a pod honour only an
	// exception without one.
	PodSelector []Requirement `json:"podSelector,omitempty"`
	// ExpiresAt is RFC 3339 in UTC, to the second: the exception applies strictly before it.
	ExpiresAt string `json:"expiresAt"`
}

// Layer is one cluster layer of a bundle.
type Layer struct {
	// Kind is LayerKindCluster.
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Priority int32  `json:"priority"`
	// PodSelector is ANDed; none selects every pod of the namespace.
	PodSelector []Requirement `json:"podSelector,omitempty"`
	// File is ClusterLayerFile(Name).
	File string `json:"file"`
	// Digest is the digest of the layer's snapshot.
	Digest string `json:"digest"`
	// Exceptions are the active exceptions that lift this layer's rules, by name.
	Exceptions []Exception `json:"exceptions,omitempty"`
}

// Requirement is one requirement of a pod selector, as a metav1.LabelSelector has them
// (matchLabels become In with one value).
type Requirement struct {
	Key string `json:"key"`
	// Operator is one of the Operator* constants.
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// The operators of a Requirement, as metav1.LabelSelectorOperator spells them.
const (
	OperatorIn           = "In"
	OperatorNotIn        = "NotIn"
	OperatorExists       = "Exists"
	OperatorDoesNotExist = "DoesNotExist"
)

// ID is how decisions name the layer: "ClusterHarnessAgentPolicy/<name>".
func (l Layer) ID() string { return LayerKindCluster + "/" + l.Name }

// Selects reports whether the layer applies to a pod with these labels, as a
// metav1.LabelSelector would: every requirement holds; no requirement selects every pod.
func (l Layer) Selects(labels map[string]string) bool { return selects(l.PodSelector, labels) }

// Selects reports whether the exception applies to a pod with these labels (its expiry and
// tools aside, which are judged per call).
func (e Exception) Selects(labels map[string]string) bool { return selects(e.PodSelector, labels) }

// selects reports whether every requirement holds for these labels.
func selects(reqs []Requirement, labels map[string]string) bool {
	for _, r := range reqs {
		v, ok := labels[r.Key]
		var holds bool
		switch r.Operator {
		case OperatorIn:
			holds = ok && slices.Contains(r.Values, v)
		case OperatorNotIn:
			holds = !ok || !slices.Contains(r.Values, v)
		case OperatorExists:
			holds = ok
		case OperatorDoesNotExist:
			holds = !ok
		}
		if !holds { // an unknown operator holds for no pod (LoadLayersIndex refuses one anyway)
			return false
		}
	}
	return true
}

// BuildLayersIndex validates an index, puts it in canonical form (layers in report order,
// each selector's requirements sorted by key and operator, values sorted and without
// repeats), fills APIVersion, Kind and Digest, and returns the file as the bootstrap ConfigMap
// carries it: the same index gives the same bytes.
func BuildLayersIndex(idx LayersIndex) ([]byte, error) {
	idx.APIVersion, idx.Kind, idx.Digest = SnapshotAPIVersion, LayersKind, ""
	idx.Layers = append([]Layer{}, idx.Layers...) // never null in the file
	for i := range idx.Layers {
		l := &idx.Layers[i]
		l.PodSelector = canonicalSelector(l.PodSelector)
		l.Exceptions = canonicalExceptions(l.Exceptions)
	}
	idx.Exceptions = canonicalExceptions(idx.Exceptions)
	slices.SortStableFunc(idx.Layers, compareLayers)
	if err := idx.checkShape(); err != nil {
		return nil, err
	}
	canonical, err := idx.canonical()
	if err != nil {
		return nil, err
	}
	idx.Digest = digestOf(canonical)
	return idx.encode()
}

// canonicalSelector is a copy of reqs in canonical form: sorted by key and operator, each one's
// values sorted and without repeats.
func canonicalSelector(reqs []Requirement) []Requirement {
	reqs = slices.Clone(reqs)
	for j := range reqs {
		reqs[j].Values = slices.Compact(slices.Sorted(slices.Values(reqs[j].Values)))
	}
	slices.SortStableFunc(reqs, compareRequirements)
	return reqs
}

// canonicalExceptions is a copy of es in canonical form: by name, rules and tools sorted and
// without repeats, selectors canonical. None is nil, so the field is left out.
func canonicalExceptions(es []Exception) []Exception {
	if len(es) == 0 {
		return nil
	}
	es = slices.Clone(es)
	for i := range es {
		e := &es[i]
		e.Rules = slices.Compact(slices.Sorted(slices.Values(e.Rules)))
		if len(e.Tools) > 0 {
			e.Tools = slices.Compact(slices.Sorted(slices.Values(e.Tools)))
		}
		e.PodSelector = canonicalSelector(e.PodSelector)
		if len(e.PodSelector) == 0 {
			e.PodSelector = nil
		}
	}
	slices.SortStableFunc(es, func(a, b Exception) int { return cmp.Compare(a.Name, b.Name) })
	return es
}

func compareLayers(a, b Layer) int {
	return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Name, b.Name))
}

func compareRequirements(a, b Requirement) int {
	return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Operator, b.Operator), slices.Compare(a.Values, b.Values))
}

// encode writes the index as Encode writes a snapshot: compact JSON on one line, the digest
// its last member.
func (idx *LayersIndex) encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(idx); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// canonical is the encoding the digest covers: encode's output without the digest member, the
// form splitDigest gives back from a file.
func (idx *LayersIndex) canonical() ([]byte, error) {
	c := *idx
	c.Digest = ""
	b, err := c.encode()
	if err != nil {
		return nil, err
	}
	const empty = `,"digest":""}` + "\n"
	if !bytes.HasSuffix(b, []byte(empty)) {
		return nil, fmt.Errorf("the layers index does not encode with its digest last")
	}
	return append(b[:len(b)-len(empty)], fileEnd...), nil
}

// checkShape checks what an index must hold to be used, and that it is in canonical order.
func (idx *LayersIndex) checkShape() error {
	if idx.APIVersion != SnapshotAPIVersion || idx.Kind != LayersKind {
		return fmt.Errorf("not a %s %s (apiVersion %q, kind %q)", SnapshotAPIVersion, LayersKind, idx.APIVersion, idx.Kind)
	}
	if !isDNSLabel(idx.Namespace) {
		return fmt.Errorf("namespace %q is not a DNS label", idx.Namespace)
	}
	for i := range idx.Layers {
		l := &idx.Layers[i]
		if err := l.checkShape(); err != nil {
			return fmt.Errorf("layers[%d]: %w", i, err)
		}
		if i > 0 {
			if prev := &idx.Layers[i-1]; compareLayers(*prev, *l) > 0 {
				return fmt.Errorf("layers[%d]: %q is out of report order (priority, then name)", i, l.Name)
			}
		}
	}
	if err := checkExceptions(idx.Exceptions); err != nil {
		return fmt.Errorf("exceptions%w", err)
	}
	// Names are unique, across priorities too: they name files.
	seen := make(map[string]int, len(idx.Layers))
	for i, l := range idx.Layers {
		if j, ok := seen[l.Name]; ok {
			return fmt.Errorf("layers[%d]: the name %q is already the name of layers[%d]", i, l.Name, j)
		}
		seen[l.Name] = i
	}
	return nil
}

func (l *Layer) checkShape() error {
	if l.Kind != LayerKindCluster {
		return fmt.Errorf("kind %q is not %s", l.Kind, LayerKindCluster)
	}
	if !isDNSLabel(l.Name) {
		return fmt.Errorf("name %q is not a DNS label", l.Name)
	}
	if want := ClusterLayerFile(l.Name); l.File != want {
		return fmt.Errorf("file %q is not %q", l.File, want)
	}
	if !isDigest(l.Digest) {
		return fmt.Errorf("digest %q is not sha256:<64 hex digits>", l.Digest)
	}
	if err := checkSelector(l.PodSelector); err != nil {
		return err
	}
	if err := checkExceptions(l.Exceptions); err != nil {
		return fmt.Errorf("exceptions%w", err)
	}
	return nil
}

// checkSelector checks a canonical pod selector.
func checkSelector(reqs []Requirement) error {
	for j := range reqs {
		r := &reqs[j]
		if err := r.checkShape(); err != nil {
			return fmt.Errorf("podSelector[%d]: %w", j, err)
		}
		if j > 0 && compareRequirements(reqs[j-1], *r) > 0 {
			return fmt.Errorf("podSelector[%d]: out of order (key, then operator)", j)
		}
	}
	return nil
}

// checkExceptions checks canonical exceptions; its errors start with the index ("[2]: ...").
func checkExceptions(es []Exception) error {
	for i := range es {
		e := &es[i]
		if err := e.checkShape(); err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
		if i > 0 && es[i-1].Name >= e.Name {
			return fmt.Errorf("[%d]: %q is out of order or repeated (by name)", i, e.Name)
		}
	}
	return nil
}

func (e *Exception) checkShape() error {
	if !isDNSSubdomain([]byte(e.Name)) {
		return fmt.Errorf("name %q is not a DNS subdomain", e.Name)
	}
	if len(e.Rules) == 0 {
		return errors.New("rules: it lifts no rule")
	}
	for k, r := range e.Rules {
		if !isDNSLabel(r) {
			return fmt.Errorf("rules[%d] %q is not a rule name", k, r)
		}
		if k > 0 && e.Rules[k-1] >= r {
			return fmt.Errorf("rules[%d] %q is out of order or repeated", k, r)
		}
	}
	for k, t := range e.Tools {
		if _, err := toolname.Compile(t); err != nil {
			return fmt.Errorf("tools[%d]: %w", k, err)
		}
		if k > 0 && e.Tools[k-1] >= t {
			return fmt.Errorf("tools[%d] %q is out of order or repeated", k, t)
		}
	}
	if err := checkSelector(e.PodSelector); err != nil {
		return err
	}
	at, err := time.Parse(time.RFC3339, e.ExpiresAt)
	if err != nil || at.UTC().Format(time.RFC3339) != e.ExpiresAt {
		return fmt.Errorf("expiresAt %q is not RFC 3339 in UTC to the second", e.ExpiresAt)
	}
	return nil
}

// expiresAt is when the exception stops applying (checkShape made sure it parses).
func (e *Exception) expiresAt() time.Time {
	at, _ := time.Parse(time.RFC3339, e.ExpiresAt)
	return at
}

func (r *Requirement) checkShape() error {
	if !isLabelKey(r.Key) {
		return fmt.Errorf("key %q is not a label key", r.Key)
	}
	switch r.Operator {
	case OperatorIn, OperatorNotIn:
		if len(r.Values) == 0 {
			return fmt.Errorf("operator %s needs at least one value", r.Operator)
		}
	case OperatorExists, OperatorDoesNotExist:
		if len(r.Values) != 0 {
			return fmt.Errorf("operator %s takes no values", r.Operator)
		}
	default:
		return fmt.Errorf("operator %q is not In, NotIn, Exists or DoesNotExist", r.Operator)
	}
	for k, v := range r.Values {
		if !isLabelValue(v) {
			return fmt.Errorf("values[%d] %q is not a label value", k, v)
		}
		if k > 0 && r.Values[k-1] >= v {
			return fmt.Errorf("values[%d] %q is out of order or repeated", k, v)
		}
	}
	return nil
}

// LoadLayersIndex parses and verifies an index: its shape, its digest and, when workspace is
// not empty, that it was issued for that workspace. Errors are *SnapshotError, with the codes
// LoadSnapshot uses.
func LoadLayersIndex(data []byte, workspace string) (*LayersIndex, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &SnapshotError{CodeSnapshotMissing, "the policy layers index is empty"}
	}
	idx := &LayersIndex{}
	if err := strictjson.Decode(data, idx); err != nil {
		return nil, &SnapshotError{CodeSnapshotCorrupt, "the policy layers index is not valid JSON: " + err.Error()}
	}
	if err := idx.checkShape(); err != nil {
		return nil, &SnapshotError{CodeSnapshotCorrupt, "the policy layers index is malformed: " + err.Error()}
	}
	canonical, claimed, ok := splitDigest(data)
	if !ok || claimed != idx.Digest {
		return nil, &SnapshotError{CodeSnapshotUnverified, "the policy layers index does not end with its digest as the operator writes it"}
	}
	if want := digestOf(canonical); idx.Digest != want {
		return nil, &SnapshotError{CodeSnapshotUnverified, fmt.Sprintf("the policy layers index digest %q does not match its content", idx.Digest)}
	}
	if workspace != "" && idx.WorkspaceID != workspace {
		return nil, &SnapshotError{CodeSnapshotUnverified, fmt.Sprintf("the policy layers index is for workspace %q, not %q", idx.WorkspaceID, workspace)}
	}
	return idx, nil
}

// isDigest reports whether s is a digest as digestOf writes one.
func isDigest(s string) bool {
	hexPart, ok := bytes.CutPrefix([]byte(s), []byte("sha256:"))
	if !ok || len(hexPart) != 64 {
		return false
	}
	for _, c := range hexPart {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isDNSLabel reports whether s is a DNS label (RFC 1123), as Kubernetes names namespaces: at
// most 63 lower-case letters, digits and '-', starting and ending with a letter or digit.
func isDNSLabel(s string) bool {
	return len(s) <= 63 && !bytes.ContainsRune([]byte(s), '.') && isDNSSubdomain([]byte(s))
}

// isLabelKey reports whether s is a label key: a name, optionally prefixed by a DNS subdomain
// and '/'.
func isLabelKey(s string) bool {
	prefix, name, found := bytes.Cut([]byte(s), []byte("/"))
	if !found {
		return isLabelName(s)
	}
	return isDNSSubdomain(prefix) && isLabelName(string(name))
}

// isLabelName reports whether s is the name part of a label key: 1 to 63 letters, digits,
// '-', '_' and '.', starting and ending with a letter or digit.
func isLabelName(s string) bool { return s != "" && isLabelValue(s) }

// isLabelValue reports whether s is a label value: empty, or a label name.
func isLabelValue(s string) bool {
	if len(s) > 63 {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for i := range len(s) {
		c := s[i]
		if !alnum(c) && (i == 0 || i == len(s)-1 || c != '-' && c != '_' && c != '.') {
			return false
		}
	}
	return true
}
