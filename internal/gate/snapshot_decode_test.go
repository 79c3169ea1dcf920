package gate

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/strictjson"
)

// canonicalSnapshots are snapshots as the operator writes them, in every shape the format has:
// prefilters of each kind, enforcement, an invalid policy, no rules, text that needs escapes.
func canonicalSnapshots(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	add := func(s *Snapshot, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		data, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	rules := []Rule{
		{Name: "regex", Tools: []string{"bash", "Monitor"}, When: `input.command.matches("rm\\s+-rf\\s+/") && !input.command.contains("\"quoted\" \\ back")`, Action: Block, Reason: "destructive <command> & \u2028 é", Code: "destructive_command"},
		{Name: "prefix-or", Tools: []string{"write"}, When: `input.file_path.startsWith("/etc/") || input.file_path.endsWith(".key") || tool == "Write"`, Action: Ask, Enforcement: Audit},
		{Name: "ne", When: `input.url != "" && size(input.url) > 3`, Action: Block},
		{Name: "no-when", Tools: []string{"task_stop"}, Action: Block, Reason: "r"},
		{Name: "opaque", When: `size(input) > 100`, Action: Allow, Code: "c"},
		{Name: "not", When: `!(input.command == "ls")`, Action: Ask, Reason: "tab\there"},
	}
	add(BuildSnapshot(PolicyMeta{Policy: "agents/a", Generation: 42, WorkspaceID: "ws_1", DefaultAction: Ask, FailurePolicy: Ignore}, rules))
	add(BuildSnapshot(PolicyMeta{Policy: "agents/b", Generation: -1, Enforcement: Audit}, rules))
	add(BuildSnapshot(PolicyMeta{Policy: "agents/empty"}, nil))
	add(BuildInvalidSnapshot(PolicyMeta{Policy: "agents/bad", Generation: 7}, "spec.rules[0].when: \"x\" is undeclared"))
	for _, name := range []string{"snapshot.golden.rules", "snapshot-empty.golden.rules", "snapshot-invalid.golden.rules"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// TestDecodeCanonical: the snapshots the operator writes take the fast path, and decode to what
// strictjson.Decode makes of them.
func TestDecodeCanonical(t *testing.T) {
	for i, data := range canonicalSnapshots(t) {
		fast, ok := decodeCanonical(data)
		if !ok {
			t.Fatalf("snapshot %d was not decoded as canonical:\n%s", i, data)
		}
		var strict Snapshot
		if err := strictjson.Decode(data, &strict); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*fast, strict) {
			t.Fatalf("snapshot %d decodes to\n%+v\nnot\n%+v", i, *fast, strict)
		}
	}
}

// TestDecodeCanonicalDefers: text the operator does not write is left to strictjson.Decode, also
// when strictjson.Decode would accept it.
func TestDecodeCanonicalDefers(t *testing.T) {
	data := string(canonicalSnapshots(t)[0])
	for name, text := range map[string]string{
		"members reordered":     strings.Replace(data, `{"apiVersion":"gate.intutic.io/v1alpha1","kind":"PolicySnapshot"`, `{"kind":"PolicySnapshot","apiVersion":"gate.intutic.io/v1alpha1"`, 1),
		"whitespace":            strings.Replace(data, `"kind":"PolicySnapshot"`, `"kind": "PolicySnapshot"`, 1),
		"a repeated member":     strings.Replace(data, `"kind":"PolicySnapshot"`, `"kind":"PolicySnapshot","kind":"PolicySnapshot"`, 1),
		"an unknown member":     strings.Replace(data, `"kind":"PolicySnapshot"`, `"kind":"PolicySnapshot","extra":1`, 1),
		"a member in caps":      strings.Replace(data, `"policy":`, `"Policy":`, 1),
		"an empty tool list":    strings.Replace(data, `"tools":["bash","Monitor"]`, `"tools":[]`, 1),
		"a float generation":    strings.Replace(data, `"generation":42`, `"generation":42.0`, 1),
		"a leading zero":        strings.Replace(data, `"generation":42`, `"generation":042`, 1),
		"invalid UTF-8":         strings.Replace(data, `agents/a`, "agents/\xff", 1),
		"a control character":   strings.Replace(data, `agents/a`, "agents/\x01", 1),
		"trailing data":         data + "{}",
		"a null prefilter":      strings.Replace(data, `"code":"c"}`, `"code":"c","prefilter":null}`, 1),
		"truncated":             data[:len(data)/2],
		"leading whitespace":    " " + data,
		"a number beyond int64": strings.Replace(data, `"generation":42`, `"generation":99999999999999999999`, 1),
	} {
		if text == data {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		if _, ok := decodeCanonical([]byte(text)); ok {
			t.Errorf("%s: decoded as canonical", name)
		}
	}
	deep := `{"apiVersion":"a","kind":"b","policy":"c","generation":1,"defaultAction":"Allow","failurePolicy":"Fail","rules":[{"name":"n","when":"w","action":"Block","prefilter":` +
		strings.Repeat(`{"op":"not","args":[`, maxCanonicalDepth+2) + `{"op":"opaque"}` + strings.Repeat(`]}`, maxCanonicalDepth+2) + `}]}`
	if _, ok := decodeCanonical([]byte(deep)); ok {
		t.Error("a prefilter nested deeper than maxCanonicalDepth was decoded as canonical")
	}
}

// FuzzDecodeCanonical: whatever decodeCanonical accepts, strictjson.Decode accepts and decodes to the
// same snapshot.
func FuzzDecodeCanonical(f *testing.F) {
	for _, data := range canonicalSnapshots(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := decodeCanonical(data)
		if !ok {
			return
		}
		var strict Snapshot
		if err := strictjson.Decode(data, &strict); err != nil {
			t.Fatalf("decoded as canonical, and strictjson.Decode refuses it: %v", err)
		}
		if !reflect.DeepEqual(*fast, strict) {
			t.Fatalf("decodes to\n%+v\nnot\n%+v", *fast, strict)
		}
	})
}
