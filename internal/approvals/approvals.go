// Package approvals is the human lane as Kubernetes objects: the ToolApprovals of one
// SessionConfirmer. The Store creates one for every call the gate sends to a human (named the
// same by every replica), reads the answers from a cache scoped to its own, says what an
// approval answers (AnswerOf, EffectiveState), and writes only the states a human cannot:
// Expired and AnsweredInRuntime. The Watch acts on the changes: an answered Managed Agents
// approval goes to its session through an Answerer (internal/confirm), an approval of the HTTP
// surfaces nobody answered turns Expired. The lifecycle itself (which states are final, how a
// state is settled with its condition) is the API's: api/v1alpha1/toolapproval_lifecycle.go.
package approvals

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/gate"
)

// Store is the human lane as Kubernetes objects: the ToolApprovals of one SessionConfirmer.
// The confirmer creates one for every call the gate sends to a human, reads the answers from a
// cache scoped to its own (namespace and label), and writes only the states a human cannot:
// Expired and AnsweredInRuntime. Nothing read here ever allows a call on its own: an approval
// counts only when it names the call it answers (spec) and records who approved it before
// its deadline (status.decision, written by the admission webhook).
type Store struct {
	// Client writes and reads fresh; Reader is the label-scoped cache (Run starts it).
	Client client.Client
	Reader client.Reader
	// Recorder records an Event on a ToolApproval for each outcome; nil records none.
	Recorder events.EventRecorder
	// Namespace, Confirmer and ConfirmerUID are the owning SessionConfirmer's; Policy is its policy.
	Namespace, Confirmer, Policy string
	ConfirmerUID                 types.UID
	// ShowInput puts a preview of the input in spec.input.preview (spec.humanApproval.showInput).
	ShowInput bool
	// Deadline is how long a call waits for a human: the approval's expiresAt, measured from the
	// call (Managed Agents: its processed_at; the HTTP surfaces: the request).
	Deadline time.Duration
	Metrics  *Metrics
	// Trail writes the decision record of each outcome (surface tool-approval); nil writes none.
	Trail *decisionlog.Recorder
	Log   logr.Logger
	// Clock reads the time; nil is the real clock.
	Clock clock.PassiveClock
}

// Metrics are the confirmer's metrics of the human lane (internal/confirm registers them).
type Metrics struct {
	// Approvals counts the ToolApprovals written, by result.
	Approvals *prometheus.CounterVec
	// Latency observes the time from a human's decision to its answer reaching the runtime.
	Latency prometheus.Observer
}

// Outcome reasons of the Events recorded on a ToolApproval (the conditions' reasons are the
// API's: gatev1.ReasonNoAnswer and the others).
const (
	EventAllowed           = "Allowed"
	EventDenied            = "Denied"
	EventExpired           = "Expired"
	EventAnsweredInRuntime = "AnsweredInRuntime"
	EventNotTrusted        = "ApprovalNotTrusted"
)

// keySurface is the audit lines' key of the surface.
const keySurface = "surface"

// maxPreview bounds spec.input.preview, in bytes (the schema bounds it at 1024 characters).
const maxPreview = 1024

// Request is a call the gate sent to a human.
type Request struct {
	Surface         gatev1.ApprovalSurface
	Session, Agent  string
	ToolUseID, Tool string
	Decision        gate.Decision
	RawInput        []byte
	ExpiresAt       time.Time
	// Pod is the sandbox pod a Hook call was made in (its token's), nil on the other surfaces.
	Pod *gatev1.ToolApprovalPod
}

// nameSession is the session Name hashes: a Hook call's is bound to its pod's UID as well, so
// that no other pod's sidecar, and no later pod of the same name, finds its approval.
func nameSession(session string, pod *gatev1.ToolApprovalPod) string {
	if pod == nil {
		return session
	}
	return "pod/" + pod.UID + "/" + session
}

// Name is the name of the ToolApproval of one call of a confirmer: a display slug of the tool
// (lower case, DNS-safe, at most 20 characters) and 20 hex digits of a SHA-256 over the
// confirmer, the surface, the session, the tool-use id, the canonical tool name in full and
// the digest of the call's input (InputDigest), each field length-prefixed so no two calls
// collide by concatenation. The slug only helps a reader: the hash is what tells calls apart,
// so another input or another tool of the same slug is another approval. Every replica and
// every restart names a call the same, so the object is created once.
func Name(confirmer string, surface gatev1.ApprovalSurface, session, toolUseID, tool, inputDigest string) string {
	h := sha256.New()
	for _, f := range []string{nameVersion, confirmer, string(surface), session, toolUseID, tool, inputDigest} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return toolSlug(tool) + "-" + hex.EncodeToString(h.Sum(nil))[:20]
}

// nameVersion is the first field Name hashes: a change of the fields is a change of it.
const nameVersion = "toolapproval-name/v2"

// InputDigest is the SHA-256, lower-case hex, of a call's input as the gate judged it (the
// JSON text the runtime sent): spec.input.sha256, and part of the approval's name.
func InputDigest(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// toolSlug is a tool name as the start of an object name: [a-z0-9-], no leading, trailing or
// doubled '-', at most 20 characters; "call" when nothing is left.
func toolSlug(tool string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(tool) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		default:
			dash = true
		}
		if b.Len() >= 20 {
			break
		}
	}
	s := strings.TrimRight(b.String()[:min(b.Len(), 20)], "-")
	if s == "" {
		return "call"
	}
	return s
}

// Name is the approval name of a call of this confirmer; rawInput is the call's input as the
// gate judged it.
func (a *Store) Name(surface gatev1.ApprovalSurface, session, toolUseID, tool string, rawInput []byte) string {
	return Name(a.Confirmer, surface, session, toolUseID, tool, InputDigest(rawInput))
}

// inputPreview is the first bytes of the input, at most maxPreview, cut on a UTF-8 boundary.
func inputPreview(raw []byte) (preview string, truncated bool) {
	s := strings.ToValidUTF8(string(raw), "\uFFFD")
	if len(s) <= maxPreview {
		return s, s != string(raw) // a preview that is not the input says so
	}
	cut := maxPreview
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

// Object is the ToolApproval of a request, as Ensure creates it.
func (a *Store) Object(r Request) *gatev1.ToolApproval {
	in := gatev1.ToolApprovalInput{Size: int64(len(r.RawInput)), SHA256: InputDigest(r.RawInput)}
	if a.ShowInput {
		in.Preview, in.Truncated = inputPreview(r.RawInput)
	}
	reason := r.Decision.Reason
	if len(reason) > 4096 {
		reason = strings.ToValidUTF8(reason[:4096], "")
	}
	// A cluster layer's Ask is the cluster policy's to approve (ClusterPolicy).
	clusterPolicy, ok := strings.CutPrefix(r.Decision.Layer, gate.LayerKindCluster+"/")
	if !ok {
		clusterPolicy = ""
	}
	return &gatev1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{
			Name: a.Name(r.Surface, nameSession(r.Session, r.Pod), r.ToolUseID, r.Tool, r.RawInput), Namespace: a.Namespace,
			Labels: map[string]string{gatev1.LabelManagedBy: gatev1.ManagedByValue, gatev1.LabelConfirmer: a.Confirmer, gatev1.LabelPolicy: a.Policy},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: gatev1.GroupVersion.String(), Kind: "SessionConfirmer", Name: a.Confirmer, UID: a.ConfirmerUID,
			}},
		},
		Spec: gatev1.ToolApprovalSpec{
			Surface: r.Surface, Policy: a.Policy, ClusterPolicy: clusterPolicy, SessionID: r.Session, AgentID: r.Agent, ToolUseID: r.ToolUseID, Tool: r.Tool,
			Rule: r.Decision.Rule, Reason: reason, SnapshotDigest: r.Decision.SnapshotDigest, Input: in,
			ExpiresAt: metav1.NewTime(r.ExpiresAt.UTC().Truncate(time.Second)), Pod: r.Pod,
		},
	}
}

// Ensure creates the ToolApproval of a call, or returns the one a replica, an earlier pass or
// an earlier run created. An object of that name that does not describe this call is an
// error: the call is then held until its deadline, never answered from it.
func (a *Store) Ensure(ctx context.Context, r Request) (*gatev1.ToolApproval, error) {
	want := a.Object(r)
	err := a.Client.Create(ctx, want)
	if err == nil {
		a.count("created")
		a.Log.Info("approval", "approval", want.Name, "state", gatev1.ApprovalPending, "surface", r.Surface, "session", r.Session,
			"toolUseId", r.ToolUseID, "tool", r.Tool, "rule", r.Decision.Rule, "incidentId", r.Decision.IncidentID, "expiresAt", want.Spec.ExpiresAt.Time)
		return want, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		a.count("error")
		return nil, fmt.Errorf("creating ToolApproval %s: %w", want.Name, err)
	}
	got, err := a.Get(ctx, want.Name)
	if apierrors.IsNotFound(err) { // the cache has not seen it yet
		got = &gatev1.ToolApproval{}
		err = a.Client.Get(ctx, client.ObjectKeyFromObject(want), got)
	}
	if err != nil {
		return nil, fmt.Errorf("reading ToolApproval %s: %w", want.Name, err)
	}
	if bad := a.mismatch(got, want); len(bad) > 0 {
		a.count("not_trusted")
		a.event(got, corev1.EventTypeWarning, EventNotTrusted, "not adopted by SessionConfirmer %s: %s differ from what it writes for this call", a.Confirmer, strings.Join(bad, ", "))
		return nil, &NotTrustedError{Name: want.Name, Fields: bad}
	}
	return got, nil
}

// ErrNotTrusted is the error (errors.Is) of an object of an approval's name that does not
// describe the call: it is never adopted, read or written; its call stays held and is denied at
// its deadline.
var ErrNotTrusted = errors.New("a ToolApproval of this name exists and does not describe the call")

// NotTrustedError names the approval and the fields that differ, never their values (an input
// preview is tool input).
type NotTrustedError struct {
	Name   string
	Fields []string
}

func (e *NotTrustedError) Error() string {
	return fmt.Sprintf("ToolApproval %s exists and does not describe this call (%s differ from what the confirmer writes): it is not used, and the call is denied at its deadline",
		e.Name, strings.Join(e.Fields, ", "))
}

// Is makes errors.Is(err, ErrNotTrusted) hold.
func (e *NotTrustedError) Is(target error) bool { return target == ErrNotTrusted }

// mismatch lists the fields in which got differs from want, the object the confirmer writes for
// the call: the labels and the owner reference it writes, and every field of the spec. The one
// field a later request recomputes, expiresAt (the HTTP surfaces measure it from the request),
// may only be earlier than want's: a squatter cannot give a call longer than the confirmer would.
func (a *Store) mismatch(got, want *gatev1.ToolApproval) []string {
	var bad []string
	add := func(differ bool, field string) {
		if differ {
			bad = append(bad, field)
		}
	}
	for _, k := range []string{gatev1.LabelManagedBy, gatev1.LabelConfirmer, gatev1.LabelPolicy} {
		v, ok := got.Labels[k]
		add(!ok || v != want.Labels[k], "metadata.labels["+k+"]")
	}
	add(!a.owned(got), "metadata.ownerReferences")
	g, w := got.Spec, want.Spec
	add(g.Surface != w.Surface, "spec.surface")
	add(g.Policy != w.Policy, "spec.policy")
	add(g.SessionID != w.SessionID, "spec.sessionID")
	add(g.AgentID != w.AgentID, "spec.agentID")
	add(g.ToolUseID != w.ToolUseID, "spec.toolUseID")
	add(g.Tool != w.Tool, "spec.tool")
	add(g.Rule != w.Rule, "spec.rule")
	add(g.Reason != w.Reason, "spec.reason")
	add(g.SnapshotDigest != w.SnapshotDigest, "spec.snapshotDigest")
	add(g.Input.Size != w.Input.Size, "spec.input.size")
	add(g.Input.SHA256 != w.Input.SHA256, "spec.input.sha256")
	add(g.Input.Preview != w.Input.Preview, "spec.input.preview")
	add(g.Input.Truncated != w.Input.Truncated, "spec.input.truncated")
	add(!equalPods(g.Pod, w.Pod), "spec.pod")
	add(g.ExpiresAt.After(w.ExpiresAt.Time), "spec.expiresAt")
	return bad
}

func equalPods(a, b *gatev1.ToolApprovalPod) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// owned reports whether ta's owner references are the one the confirmer writes.
func (a *Store) owned(ta *gatev1.ToolApproval) bool {
	if len(ta.OwnerReferences) != 1 {
		return false
	}
	o := ta.OwnerReferences[0]
	return o.APIVersion == gatev1.GroupVersion.String() && o.Kind == "SessionConfirmer" && o.Name == a.Confirmer && o.UID == a.ConfirmerUID
}

// ExpiryGrace is how long past its deadline, by the confirmer's clock, a call waits for its
// Expired to be recorded before it is denied without it (docs/approvals.md, "Clocks"): the
// API server's clock measures the deadline, and an approval it admits before then counts.
const ExpiryGrace = time.Minute

// maxClockSkew is how far ahead of the API server's clock the confirmer's may be for
// TrustedObject's bound on expiresAt (metadata.creationTimestamp is the server's).
const maxClockSkew = time.Minute

// Get reads a ToolApproval of this confirmer from the cache.
func (a *Store) Get(ctx context.Context, name string) (*gatev1.ToolApproval, error) {
	ta := &gatev1.ToolApproval{}
	if err := a.Reader.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: name}, ta); err != nil {
		return nil, err
	}
	if ta.Labels[gatev1.LabelConfirmer] != a.Confirmer {
		return nil, apierrors.NewNotFound(gatev1.GroupVersion.WithResource("toolapprovals").GroupResource(), name)
	}
	return ta, nil
}

// TrustedObject reports whether an approval read without its call (the watch, GET
// /v1/approvals/{name}, a call answered in the runtime) is one this confirmer wrote, as far as
// the object itself can show: the labels and owner reference it writes, its policy, its name
// the Name of the surface, session, tool-use id, tool and input digest in its spec (so those
// are bound to the name), a preview only when the confirmer shows input and then one that
// matches the digest unless it says it is truncated, and an expiresAt no later than a call of
// now or of the object's creation would get. The reason and rule are checked where the call is
// known (Ensure, Matches); the spec is immutable after creation.
func (a *Store) TrustedObject(ta *gatev1.ToolApproval) bool {
	for _, k := range []string{gatev1.LabelManagedBy, gatev1.LabelConfirmer, gatev1.LabelPolicy} {
		want := map[string]string{gatev1.LabelManagedBy: gatev1.ManagedByValue, gatev1.LabelConfirmer: a.Confirmer, gatev1.LabelPolicy: a.Policy}[k]
		if v, ok := ta.Labels[k]; !ok || v != want {
			return false
		}
	}
	sp := ta.Spec
	if !a.owned(ta) || sp.Policy != a.Policy || ta.Namespace != a.Namespace ||
		ta.Name != Name(a.Confirmer, sp.Surface, nameSession(sp.SessionID, sp.Pod), sp.ToolUseID, sp.Tool, sp.Input.SHA256) ||
		(sp.Pod != nil) != (sp.Surface == gatev1.SurfaceHook) {
		return false
	}
	in := sp.Input
	switch {
	case !a.ShowInput && (in.Preview != "" || in.Truncated):
		return false
	case a.ShowInput && !in.Truncated && (InputDigest([]byte(in.Preview)) != in.SHA256 || int64(len(in.Preview)) != in.Size):
		return false
	}
	latest := a.Now().Add(a.Deadline)
	if !ta.CreationTimestamp.IsZero() {
		latest = minTime(latest, ta.CreationTimestamp.Add(a.Deadline+maxClockSkew))
	}
	return !sp.ExpiresAt.After(latest)
}

// Matches reports whether an approval read for a known call is the one the confirmer writes
// for it (every field Ensure compares).
func (a *Store) Matches(ta *gatev1.ToolApproval, r Request) bool {
	return len(a.mismatch(ta, a.Object(r))) == 0
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Answer is what an approval says to do with its call.
type Answer int

// The answers of an approval.
const (
	NoAnswer Answer = iota // Pending, absent, or not to be trusted: hold until the deadline
	Approved
	Denied
	Expired
	AnsweredInRuntime
)

// answers are the final states and the answer each gives; Approved counts only as AnswerOf says.
var answers = map[gatev1.ToolApprovalState]Answer{
	gatev1.ApprovalApproved: Approved, gatev1.ApprovalDenied: Denied,
	gatev1.ApprovalExpired: Expired, gatev1.ApprovalAnsweredInRuntime: AnsweredInRuntime,
}

// AnswerOf reads an approval. Approved counts only with the approver recorded (the admission
// webhook writes it from the request) and, when the time is recorded, before expiresAt.
func AnswerOf(ta *gatev1.ToolApproval) Answer {
	if ta == nil || !ta.Status.State.Final() {
		return NoAnswer
	}
	ans := answers[ta.Status.State]
	if d := ta.Status.Decision; ans == Approved && (d == nil || d.User == "" || (d.Time != nil && !d.Time.Before(&ta.Spec.ExpiresAt))) {
		return NoAnswer
	}
	return ans
}

// DeniedMessage is the refusal the agent reads for a human's denial: the approver's message
// when there is one, else the rule's reason.
func DeniedMessage(ta *gatev1.ToolApproval) string {
	if d := ta.Status.Decision; d != nil && d.Message != "" {
		return gate.RefusalPrefix + "a human denied this call: " + d.Message
	}
	return gate.RefusalPrefix + "a human denied this call (" + ta.Spec.Reason + ")"
}

// ErrSettled is returned by Settle and Expire when the approval was answered meanwhile; the
// fresh object comes with it.
var ErrSettled = errors.New("the ToolApproval was answered meanwhile")

// Settle writes a final state the confirmer owns (Expired, AnsweredInRuntime) on a Pending
// approval, with its condition (gatev1.ToolApproval.Settle), through the status subresource.
// On a conflict it returns the object as it is now and ErrSettled when that is final, so the
// caller acts on that answer.
func (a *Store) Settle(ctx context.Context, ta *gatev1.ToolApproval, state gatev1.ToolApprovalState, reason, message string) (*gatev1.ToolApproval, error) {
	for range 3 {
		if ta.Status.State.Final() {
			return ta, ErrSettled
		}
		next := ta.DeepCopy()
		if err := next.Settle(state, reason, message, a.Now()); err != nil {
			return ta, err
		}
		err := a.Client.Status().Update(ctx, next)
		if err == nil {
			a.count(strings.ToLower(string(state)))
			return next, nil
		}
		if !apierrors.IsConflict(err) {
			a.count("error")
			return ta, fmt.Errorf("writing %s on ToolApproval %s: %w", state, ta.Name, err)
		}
		fresh := &gatev1.ToolApproval{}
		if err := a.Client.Get(ctx, client.ObjectKeyFromObject(ta), fresh); err != nil {
			return ta, fmt.Errorf("re-reading ToolApproval %s after a conflict: %w", ta.Name, err)
		}
		ta = fresh
	}
	return ta, fmt.Errorf("writing %s on ToolApproval %s: conflicts kept coming", state, ta.Name)
}

// event records an outcome on the approval.
func (a *Store) event(ta *gatev1.ToolApproval, typ, reason, note string, args ...any) {
	if a.Recorder != nil {
		a.Recorder.Eventf(ta, nil, typ, reason, reason, note, args...)
	}
}

// Outcome writes the audit line, Event and metrics of an answer that reached the runtime (or
// was recorded without reaching it).
func (a *Store) Outcome(ta *gatev1.ToolApproval, reason, note string) {
	typ := corev1.EventTypeNormal
	if reason != EventAllowed {
		typ = corev1.EventTypeWarning
	}
	kv := []any{"approval", ta.Name, "state", ta.Status.State, "outcome", reason, keySurface, ta.Spec.Surface, "session", ta.Spec.SessionID,
		"toolUseId", ta.Spec.ToolUseID, "tool", ta.Spec.Tool, "rule", ta.Spec.Rule}
	if d := ta.Status.Decision; d != nil {
		kv = append(kv, "user", d.User, "groups", strings.Join(d.Groups, ","))
		if d.Time != nil && a.Metrics != nil && (reason == EventAllowed || reason == EventDenied) {
			a.Metrics.Latency.Observe(a.Now().Sub(d.Time.Time).Seconds())
		}
	}
	a.Log.Info("approval", kv...)
	a.event(ta, typ, reason, "%s", note)
	a.Trail.Write(OutcomeRecord(ta, reason))
}

// OutcomeRecord is the decision record of an approval's outcome: the verdict the caller got
// (Allow for Allowed; Ask for AnsweredInRuntime, which the runtime's own human answered; Block
// otherwise), the approval and who answered it, and the call it held (tool, session, tool use,
// rule, input size and SHA-256, never the input).
func OutcomeRecord(ta *gatev1.ToolApproval, outcome string) decisionlog.Record {
	verdict := gate.Block
	switch outcome {
	case EventAllowed:
		verdict = gate.Allow
	case EventAnsweredInRuntime:
		verdict = gate.Ask
	}
	rec := decisionlog.Record{
		Schema: decisionlog.Schema, Time: decisionlog.Now(), DecisionID: gate.NewIncidentID(), Surface: decisionlog.SurfaceToolApproval,
		Agent: ta.Spec.AgentID, Session: ta.Spec.SessionID, ToolUseID: ta.Spec.ToolUseID, Digest: ta.Spec.SnapshotDigest,
		Rule: ta.Spec.Rule, Verdict: string(verdict), Enforcement: decisionlog.EnforcementEnforce, Reason: ta.Spec.Reason, Tool: ta.Spec.Tool,
		InputBytes: ta.Spec.Input.Size, InputSHA256: ta.Spec.Input.SHA256,
		Approval: &decisionlog.ApprovalRecord{Name: ta.Name, State: string(ta.Status.State), Outcome: outcome},
	}
	if ta.Spec.Policy != "" {
		rec.Policy = ta.Namespace + "/" + ta.Spec.Policy
	}
	if d := ta.Status.Decision; d != nil {
		rec.Approval.User = d.User
	}
	return rec
}

func (a *Store) count(result string) {
	if a.Metrics != nil {
		a.Metrics.Approvals.WithLabelValues(result).Inc()
	}
}

// Now is the time on the store's clock.
func (a *Store) Now() time.Time {
	if a.Clock == nil {
		return clock.RealClock{}.Now()
	}
	return a.Clock.Now()
}

// Expire writes Expired (condition Expired True, reason NoAnswer) on a Pending approval; the
// caller denies the call whatever this returns, unless it returns the object answered
// meanwhile with ErrSettled.
func (a *Store) Expire(ctx context.Context, ta *gatev1.ToolApproval) (*gatev1.ToolApproval, error) {
	return a.Settle(ctx, ta, gatev1.ApprovalExpired, gatev1.ReasonNoAnswer,
		fmt.Sprintf("no human approved this call within %s; it was denied", a.Deadline))
}

// EffectiveState is the state a caller of the HTTP surfaces acts on at now: the approval's,
// except an Approved that does not count (AnswerOf: no approver recorded, or recorded after
// the deadline), which reads as Pending until the deadline and Expired after it.
func EffectiveState(ta *gatev1.ToolApproval, now time.Time) gatev1.ToolApprovalState {
	if AnswerOf(ta) == NoAnswer {
		if !now.Before(ta.Spec.ExpiresAt.Time) {
			return gatev1.ApprovalExpired
		}
		return gatev1.ApprovalPending
	}
	return ta.Status.State
}
