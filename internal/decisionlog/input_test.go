package decisionlog_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/decisionlog/decisionlogtest"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestRecordedInput: a policy that opts into input (its snapshot carries recordInput, through
// Encode and Load as a pod's gate reads it) gets records holding the input with its masks
// applied: erased members gone, hashed ones as sha256:<hex> of their JSON, the pointers applied
// listed in erased and masked and those the input lacks skipped. The same call under a policy
// that does not opt in records no input. Input over the cap or not JSON is left out, saying why.
func TestRecordedInput(t *testing.T) {
	masks := &gate.InputRecording{Erase: []string{"/content", "/edits/0", "/absent"}, Hash: []string{"/meta/token", "/a~1b"}}
	opted := gatetest.GateWith(t, gate.PolicyMeta{RecordInput: masks}, gate.Rule{Name: "writes-allowed", Tools: []string{"Write"}, Action: gate.Allow})
	plain := gatetest.GateWith(t, gate.PolicyMeta{}, gate.Rule{Name: "writes-allowed", Tools: []string{"Write"}, Action: gate.Allow})
	raw := `{"file_path":"/w/a.go","content":"SECRET-TEXT","meta":{"token":"T0K3N","keep":1.50},"edits":[{"n":"SECRET-EDIT"},{"n":2}],"a/b":"SECRET-SLASH"}`
	hashOf := func(s string) string { sum := sha256.Sum256([]byte(s)); return "sha256:" + hex.EncodeToString(sum[:]) }

	record := func(g *gate.Gate, raw string) decisionlog.Record {
		t.Helper()
		var out testutil.SyncBuffer
		w := decisionlog.NewWriter(&out, decisionlog.WriterOptions{})
		decisionlog.New(w, decisionlog.Source{ReportedBy: decisionlog.ReportedByConfirmer}, nil).
			EvaluateRaw(g, &gate.Call{Tool: "Write", Surface: gate.SurfaceHarness}, []byte(raw), decisionlog.Origin{})
		w.Close()
		if strings.Contains(out.String(), "SECRET") {
			t.Fatalf("a masked member is in the record: %s", out.String())
		}
		recs := decisionlogtest.ValidateLines(t, out.String())
		if len(recs) != 1 {
			t.Fatalf("%d records", len(recs))
		}
		return recs[0]
	}

	got := record(opted, raw)
	if got.Verdict != "Allow" || got.InputBytes != int64(len(raw)) {
		t.Fatalf("record %+v", got)
	}
	wantInput := `{"a/b":"` + hashOf(`"SECRET-SLASH"`) + `","edits":[{"n":2}],"file_path":"/w/a.go","meta":{"keep":1.5,"token":"` + hashOf(`"T0K3N"`) + `"}}`
	if string(got.Input) != wantInput {
		t.Errorf("input\n%s\nwant\n%s", got.Input, wantInput)
	}
	if strings.Join(got.Erased, " ") != "/content /edits/0" || strings.Join(got.Masked, " ") != "/meta/token /a~1b" || got.InputOmitted != "" {
		t.Errorf("erased %v, masked %v, omitted %q", got.Erased, got.Masked, got.InputOmitted)
	}

	if got := record(plain, raw); got.Input != nil || got.Erased != nil || got.Masked != nil || got.InputOmitted != "" {
		t.Errorf("a policy that does not opt in recorded %+v", got)
	}
	big := `{"content":"SECRET","other":"` + strings.Repeat("x", decisionlog.MaxRecordedInput) + `"}`
	if got := record(opted, big); got.Input != nil || got.Erased != nil || got.InputOmitted != decisionlog.InputOmittedTooLarge {
		t.Errorf("an input over the cap: %+v", got.InputOmitted)
	}
	// Input the gate cannot read is refused before any policy decides: the refusal opts into nothing.
	if got := record(opted, `{"content":"SECRET"} {}`); got.Input != nil || got.InputOmitted != "" || got.Code != gate.CodeInputInvalid {
		t.Errorf("input that is not one JSON value: omitted %q, code %q", got.InputOmitted, got.Code)
	}
	// A surface that hands over what its policy decided from another encoding still records none.
	rec := decisionlog.FromDecision(gate.Decision{Verdict: gate.Allow, IncidentID: "inc", RecordInput: masks}, nil, []byte(`SECRET`))
	if rec.Input != nil || rec.InputOmitted != decisionlog.InputOmittedNotJSON {
		t.Errorf("input that is not JSON: %+v", rec)
	}
}
