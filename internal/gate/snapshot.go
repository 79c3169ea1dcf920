package gate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/intutic/gate-operator/internal/strictjson"
)

// The snapshot format: policy-snapshot.rules in the bootstrap ConfigMap.
const (
	SnapshotAPIVersion = "gate.intutic.io/v1alpha1"
	SnapshotKind       = "PolicySnapshot"
	// SnapshotFileName is the key of the snapshot in the bootstrap ConfigMap.
	SnapshotFileName = "policy-snapshot.rules"
	// CheckedFileName is the key of the checked rules file beside the snapshot, which
	// gate-hook-cel plans the rules from without parsing them (see checked.go); optional.
	CheckedFileName = "policy-snapshot.checked"
	// maxSnapshotBytes bounds what LoadSnapshotFile reads: 512 rules of 4 KiB expressions fit
	// several times over.
	maxSnapshotBytes = 16 << 20
)

// Rule is one rule as the snapshot carries it.
type Rule struct {
	Name   string   `json:"name"`
	Tools  []string `json:"tools,omitempty"`
	When   string   `json:"when,omitempty"`
	Action Verdict  `json:"action"`
	Reason string   `json:"reason,omitempty"`
	Code   string   `json:"code,omitempty"`
	// Enforcement overrides the policy's for this rule; empty is the policy's.
	Enforcement Enforcement `json:"enforcement,omitempty"`
	// Prefilter is derived from When when the snapshot is built (see Prefilter), so the hook
	// can rule the rule out without compiling CEL. The digest covers it with When.
	Prefilter *Prefilter `json:"prefilter,omitempty"`
}

// PolicyMeta is the policy metadata a snapshot records.
type PolicyMeta struct {
	// Policy is <namespace>/<name>.
	Policy        string
	Generation    int64
	WorkspaceID   string
	DefaultAction Verdict
	FailurePolicy FailurePolicy
	// Enforcement is the policy's: Enforce when empty.
	Enforcement Enforcement
	// RecordInput is the policy's opt-in to records that hold the input (masked); nil, none.
	RecordInput *InputRecording
}

// Snapshot is the versioned, self-describing rules snapshot. Digest covers the canonical
// encoding of every other field: the file as Encode writes it, without the digest member (see
// canonical). Verifying the bytes themselves, rather than a re-encoding of what was decoded,
// is both stricter and cheaper for the hook.
type Snapshot struct {
	APIVersion    string        `json:"apiVersion"`
	Kind          string        `json:"kind"`
	Policy        string        `json:"policy"`
	Generation    int64         `json:"generation"`
	WorkspaceID   string        `json:"workspaceID,omitempty"`
	DefaultAction Verdict       `json:"defaultAction"`
	FailurePolicy FailurePolicy `json:"failurePolicy"`
	// Enforcement is Audit, or absent for Enforce (see Mode and normalizeEnforcement).
	Enforcement Enforcement `json:"enforcement,omitempty"`
	// Invalid, when set, says why the policy has never compiled; such a snapshot blocks every
	// call with code policy_invalid, so a sandbox is never ungoverned.
	Invalid string `json:"invalid,omitempty"`
	Rules   []Rule `json:"rules"`
	// RecordInput is the policy's opt-in to decision records holding the tool input, masked.
	// decodeCanonical does not read it: a snapshot that has it is decoded by strictjson.Decode.
	RecordInput *InputRecording `json:"recordInput,omitempty"`
	Digest      string          `json:"digest,omitempty"`

	// precompiled is the checked rules file beside a snapshot LoadSnapshotFile read.
	precompiled *precompiled
}

func assemble(meta PolicyMeta, rules []Rule) (*Snapshot, error) {
	if meta.DefaultAction == "" {
		meta.DefaultAction = Allow
	}
	if meta.FailurePolicy == "" {
		meta.FailurePolicy = Fail
	}
	s := &Snapshot{
		APIVersion:    SnapshotAPIVersion,
		Kind:          SnapshotKind,
		Policy:        meta.Policy,
		Generation:    meta.Generation,
		WorkspaceID:   meta.WorkspaceID,
		DefaultAction: meta.DefaultAction,
		FailurePolicy: meta.FailurePolicy,
		Enforcement:   meta.Enforcement,
		Rules:         append([]Rule{}, rules...),
		RecordInput:   meta.RecordInput,
	}
	if err := s.checkShape(); err != nil {
		return nil, err
	}
	s.normalizeEnforcement()
	digest, err := s.computeDigest()
	if err != nil {
		return nil, err
	}
	s.Digest = digest
	return s, nil
}

// BuildInvalidSnapshot builds the snapshot of a policy that has never compiled: no rules, and
// every call is blocked with code policy_invalid and the given reason.
func BuildInvalidSnapshot(meta PolicyMeta, reason string) (*Snapshot, error) {
	if reason == "" {
		reason = "the policy's rules do not compile"
	}
	// policy_invalid is a fault, which no enforcement mode lets through: the snapshot says Enforce.
	meta.Enforcement = ""
	s, err := assemble(meta, nil)
	if err != nil {
		return nil, err
	}
	s.Invalid = reason
	if s.Digest, err = s.computeDigest(); err != nil {
		return nil, err
	}
	return s, nil
}

// Encode returns the snapshot as the file the bootstrap ConfigMap carries: compact JSON on one
// line with the digest as its last member. Compact, because a ConfigMap holds at most 1 MiB and
// indentation grows with every level of nesting.
func (s *Snapshot) Encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// canonical is the encoding the digest covers: Encode's output for every field but the digest,
// in the declared field order, without HTML escaping, newline-terminated.
func (s *Snapshot) canonical() ([]byte, error) {
	c := *s
	c.Digest = ""
	return c.Encode()
}

func (s *Snapshot) computeDigest() (string, error) {
	b, err := s.canonical()
	if err != nil {
		return "", err
	}
	return digestOf(b), nil
}

func digestOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// digestMember is how Encode writes the digest: the last member of the top-level object.
const (
	digestMember = `,"digest":"`
	fileEnd      = "}\n"
)

// splitDigest returns the canonical bytes of an encoded snapshot and the digest it claims.
func splitDigest(data []byte) (canonical []byte, digest string, ok bool) {
	i := bytes.LastIndex(data, []byte(digestMember))
	if i < 0 {
		return nil, "", false
	}
	rest := data[i+len(digestMember):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 || string(rest[end+1:]) != fileEnd {
		return nil, "", false
	}
	canonical = append(append(make([]byte, 0, i+len(fileEnd)), data[:i]...), fileEnd...)
	return canonical, string(rest[:end]), true
}

// checkShape checks what a snapshot must hold to be evaluated at all.
func (s *Snapshot) checkShape() error {
	if s.APIVersion != SnapshotAPIVersion || s.Kind != SnapshotKind {
		return fmt.Errorf("not a %s %s (apiVersion %q, kind %q)", SnapshotAPIVersion, SnapshotKind, s.APIVersion, s.Kind)
	}
	if !validVerdict(s.DefaultAction) {
		return fmt.Errorf("defaultAction %q is not Allow, Ask or Block", s.DefaultAction)
	}
	if s.FailurePolicy != Fail && s.FailurePolicy != Ignore {
		return fmt.Errorf("failurePolicy %q is not Fail or Ignore", s.FailurePolicy)
	}
	if !validEnforcement(s.Enforcement) {
		return fmt.Errorf("enforcement %q is not Enforce or Audit", s.Enforcement)
	}
	for i, r := range s.Rules {
		if r.Name == "" {
			return fmt.Errorf("rules[%d] has no name", i)
		}
		if !validVerdict(r.Action) {
			return fmt.Errorf("rules[%d].action %q is not Allow, Ask or Block", i, r.Action)
		}
		if !validEnforcement(r.Enforcement) {
			return fmt.Errorf("rules[%d].enforcement %q is not Enforce or Audit", i, r.Enforcement)
		}
	}
	if s.RecordInput != nil {
		return s.RecordInput.checkShape()
	}
	return nil
}

func validVerdict(v Verdict) bool { return v == Allow || v == Ask || v == Block }

// SnapshotError is why a snapshot cannot be used; Code is one of the snapshot_* codes.
type SnapshotError struct {
	Code   string
	Reason string
}

func (e *SnapshotError) Error() string { return e.Code + ": " + e.Reason }

// LoadSnapshot parses and verifies a snapshot: its shape, its digest and, when workspace is
// not empty, that it was issued for that workspace. Errors are *SnapshotError.
func LoadSnapshot(data []byte, workspace string) (*Snapshot, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &SnapshotError{CodeSnapshotMissing, "the policy snapshot is empty"}
	}
	s, fast := decodeCanonical(data)
	if !fast {
		s = &Snapshot{}
		if err := strictjson.Decode(data, s); err != nil {
			return nil, &SnapshotError{CodeSnapshotCorrupt, "the policy snapshot is not valid JSON: " + err.Error()}
		}
	}
	if err := s.checkShape(); err != nil {
		return nil, &SnapshotError{CodeSnapshotCorrupt, "the policy snapshot is malformed: " + err.Error()}
	}
	canonical, claimed, ok := splitDigest(data)
	if !ok || claimed != s.Digest {
		return nil, &SnapshotError{CodeSnapshotUnverified, "the policy snapshot does not end with its digest as the operator writes it"}
	}
	if want := digestOf(canonical); s.Digest != want {
		return nil, &SnapshotError{CodeSnapshotUnverified, fmt.Sprintf("the policy snapshot digest %q does not match its content", s.Digest)}
	}
	if workspace != "" && s.WorkspaceID != workspace {
		return nil, &SnapshotError{CodeSnapshotUnverified, fmt.Sprintf("the policy snapshot is for workspace %q, not %q", s.WorkspaceID, workspace)}
	}
	return s, nil
}

// LoadSnapshotFile reads and verifies the snapshot at path (see LoadSnapshot). An absent or
// empty file is snapshot_missing; an unreadable or oversized one is snapshot_corrupt.
func LoadSnapshotFile(path, workspace string) (*Snapshot, error) {
	return loadSnapshotFile(path, filepath.Join(filepath.Dir(path), CheckedFileName), workspace)
}

// loadSnapshotFile is LoadSnapshotFile with the checked rules file at checked.
func loadSnapshotFile(path, checked, workspace string) (*Snapshot, error) {
	data, rerr := readBounded(path, "policy snapshot", maxSnapshotBytes)
	if rerr != nil {
		return nil, rerr
	}
	s, err := LoadSnapshot(data, workspace)
	if err != nil {
		return nil, err
	}
	s.precompiled = newPrecompiled(checked, s)
	return s, nil
}

// readBounded reads the file at path, the what of a bundle, refusing one over limit bytes. An
// absent file is snapshot_missing, an unreadable or oversized one snapshot_corrupt.
func readBounded(path, what string, limit int64) ([]byte, *SnapshotError) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &SnapshotError{CodeSnapshotMissing, "no " + what + " at " + path}
	}
	if err != nil {
		return nil, &SnapshotError{CodeSnapshotCorrupt, "the " + what + " cannot be read: " + err.Error()}
	}
	defer f.Close()
	// Read into a buffer of the file's size, as os.ReadFile does: io.ReadAll would grow one
	// from 512 bytes, copying and faulting in pages at each step, which a one-call hook pays for.
	var buf bytes.Buffer
	if fi, err := f.Stat(); err == nil && fi.Size() <= limit {
		buf.Grow(int(fi.Size()) + bytes.MinRead)
	}
	_, err = buf.ReadFrom(io.LimitReader(f, limit+1))
	data := buf.Bytes()
	if err != nil {
		return nil, &SnapshotError{CodeSnapshotCorrupt, "the " + what + " cannot be read: " + err.Error()}
	}
	if int64(len(data)) > limit {
		return nil, &SnapshotError{CodeSnapshotCorrupt, fmt.Sprintf("the %s is larger than %d bytes", what, limit)}
	}
	return data, nil
}
