package gate

import (
	"fmt"
	"regexp"
	"slices"
)

// InputRecording is a policy's opt-in to decision records that hold the tool input
// (spec.decisionRecords.input): only with masks, JSON pointers (RFC 6901) into the input of
// every tool. The gate decides nothing by it; it rides on each Decision of the policy
// (Decision.RecordInput) to the surface that writes the record (internal/decisionlog).
type InputRecording struct {
	// Erase are pointers to members removed before the input is recorded.
	Erase []string `json:"erase,omitempty"`
	// Hash are pointers to members whose values are recorded as their SHA-256.
	Hash []string `json:"hash,omitempty"`
}

// maxInputMasks bounds each list of masks, as the API does.
const maxInputMasks = 32

// jsonPointer is the API's JSONPointer pattern: one or more reference tokens.
var jsonPointer = regexp.MustCompile(`^(/([^~/]|~[01])*)+$`)

// checkShape refuses what the API refuses: no mask at all, too many, or a pointer that is not one.
func (r *InputRecording) checkShape() error {
	if len(r.Erase)+len(r.Hash) == 0 {
		return fmt.Errorf("recordInput lists no mask")
	}
	for _, list := range []struct {
		field string
		ptrs  []string
	}{{"erase", r.Erase}, {"hash", r.Hash}} {
		if len(list.ptrs) > maxInputMasks {
			return fmt.Errorf("recordInput.%s has %d pointers, more than %d", list.field, len(list.ptrs), maxInputMasks)
		}
		for i, p := range list.ptrs {
			if len(p) > 256 || !jsonPointer.MatchString(p) {
				return fmt.Errorf("recordInput.%s[%d] %q is not a JSON pointer such as /content", list.field, i, p)
			}
		}
	}
	return nil
}

// mergeInputRecordings is the recording of a call that several layers decide: the input is
// recorded when any layer opts in, with the masks of every layer that does, so no layer's mask is
// lost to another's opt-in. A pointer erased by one and hashed by another is erased. Nil when no
// layer opts in.
func mergeInputRecordings(rs ...*InputRecording) *InputRecording {
	var out *InputRecording
	for _, r := range rs {
		if r == nil {
			continue
		}
		if out == nil {
			out = &InputRecording{}
		}
		out.Erase = append(out.Erase, r.Erase...)
		out.Hash = append(out.Hash, r.Hash...)
	}
	if out == nil {
		return nil
	}
	slices.Sort(out.Erase)
	out.Erase = slices.Compact(out.Erase)
	slices.Sort(out.Hash)
	out.Hash = slices.DeleteFunc(slices.Compact(out.Hash), func(p string) bool { _, erased := slices.BinarySearch(out.Erase, p); return erased })
	return out
}
