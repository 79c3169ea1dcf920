package decisionlog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/go-openapi/jsonpointer"

	"github.com/intutic/gate-operator/internal/gate"
)

// MaxRecordedInput bounds the input a record holds, once masked: a larger input is left out
// (InputOmitted "too_large"), so one call cannot put a file's worth of text in a log line.
const MaxRecordedInput = 16 << 10

// Why a record that a policy opted into input holds none (Record.InputOmitted).
const (
	InputOmittedTooLarge = "too_large"
	InputOmittedNotJSON  = "not_json"
)

// toolInput is the tool input a record holds: the call's, as the gate rendered it, so the
// masks' pointers mean the same on every surface (gate-agent's rawInput is the whole hook
// payload, the others' the tool input itself); rawInput when there is no call.
func toolInput(c *gate.Call, rawInput []byte) []byte {
	if c == nil || c.Input == nil {
		return rawInput
	}
	b, err := json.Marshal(c.Input)
	if err != nil {
		return nil
	}
	return b
}

// recordInput puts the call's input on rec, masked as the policy's opt-in r says: erased
// pointers first (their members removed), then hashed ones (their values replaced by the
// SHA-256 of their JSON encoding, "sha256:<hex>"). A pointer the input does not hold is skipped;
// rec.Erased and rec.Masked list those applied, as OPA's decision log does.
func recordInput(rec *Record, raw []byte, r *gate.InputRecording) {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || dec.More() {
		rec.InputOmitted = InputOmittedNotJSON
		return
	}
	for _, p := range r.Erase {
		if erase(&doc, p) {
			rec.Erased = append(rec.Erased, p)
		}
	}
	for _, p := range r.Hash {
		if hash(&doc, p) {
			rec.Masked = append(rec.Masked, p)
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		rec.InputOmitted = InputOmittedNotJSON
		return
	}
	if len(b) > MaxRecordedInput {
		rec.InputOmitted, rec.Erased, rec.Masked = InputOmittedTooLarge, nil, nil
		return
	}
	rec.Input = b
}

// erase removes the member (or array element) at pointer p from doc; false when doc holds none.
func erase(doc *any, p string) bool {
	ptr, err := jsonpointer.New(p)
	if err != nil {
		return false
	}
	tokens := ptr.DecodedTokens()
	last := tokens[len(tokens)-1]
	parentPtr, err := jsonpointer.New(p[:strings.LastIndexByte(p, '/')])
	if err != nil {
		return false
	}
	parent, _, err := parentPtr.Get(*doc)
	if err != nil {
		return false
	}
	switch parent := parent.(type) {
	case map[string]any:
		if _, ok := parent[last]; !ok {
			return false
		}
		delete(parent, last) // the map is doc's own
		return true
	case []any:
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i >= len(parent) {
			return false
		}
		shorter := slices.Delete(slices.Clone(parent), i, i+1)
		if parentPtr.IsEmpty() {
			*doc = shorter
			return true
		}
		_, err = parentPtr.Set(*doc, shorter)
		return err == nil
	}
	return false
}

// hash replaces the value at pointer p in doc by the SHA-256 of its JSON encoding; false when
// doc holds none.
func hash(doc *any, p string) bool {
	ptr, err := jsonpointer.New(p)
	if err != nil {
		return false
	}
	v, _, err := ptr.Get(*doc)
	if err != nil {
		return false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	sum := sha256.Sum256(b)
	_, err = ptr.Set(*doc, "sha256:"+hex.EncodeToString(sum[:]))
	return err == nil
}
