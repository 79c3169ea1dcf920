package gateagent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/gateagent/gateagenttest"
	"github.com/intutic/gate-operator/internal/testutil"
)

// spoolServer is a Server reading the spool at path, not running: the test reads the spool
// with readSpool, as reportFallbacks does on its ticks.
func spoolServer(t *testing.T, path string) *running {
	t.Helper()
	r := &running{records: &testutil.SyncBuffer{}, reg: prometheus.NewRegistry()}
	s, err := New(Options{BundleDir: t.TempDir(), FallbackSpool: path, Records: r.records, Registerer: r.reg, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.records.Close) // Run would close it
	r.Server = s
	return r
}

func fallbackLine(t *testing.T, reason, verdict string) string {
	t.Helper()
	sum := sha256.Sum256([]byte("input"))
	b, err := json.Marshal(agentproto.FallbackRecord{Time: "2026-12-04T22:00:00.123Z", Reason: reason, Verdict: verdict, Enforcement: "enforce",
		Code: "destructive_command", Rule: "no-rm", Tool: "Bash", InputBytes: 5, InputSHA256: hex.EncodeToString(sum[:]), Digest: "sha256:" + strings.Repeat("0", 64)})
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestFallbackSpool: each new well-formed line of the spool is reported once, as a record the
// hook reported and nobody vouches for, and counted by reason and verdict; lines too long or
// malformed are skipped and counted; a line not yet whole waits for its end; a spool truncated
// or replaced is read from its start; a symlink is not followed.
func TestFallbackSpool(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fallback.ndjson")
	r := spoolServer(t, path)
	r.readSpool() // no spool yet: nothing, no error
	appendTo(t, path, fallbackLine(t, agentproto.FallbackTimeout, "Block")+
		"{not json\n"+
		fallbackLine(t, "made-up-reason", "Allow")+
		fallbackLine(t, agentproto.FallbackGarbage, "Maybe")+
		strings.Repeat("x", agentproto.MaxFallbackLine+10)+"\n"+
		strings.TrimSuffix(fallbackLine(t, agentproto.FallbackVersion, "Ask"), "\n"))
	r.readSpool()
	recs := r.recordLines(t)
	if len(recs) != 2 {
		t.Fatalf("%d records, want the 2 well-formed whole lines: %+v", len(recs), recs)
	}
	first := recs[0]
	if first.Surface != decisionlog.SurfaceHookFallback || first.ReportedBy != "hook" || !first.Untrusted || first.FallbackReason != agentproto.FallbackTimeout ||
		first.Time != "2026-12-04T22:00:00.123Z" || first.ReportedAt == "" || first.Verdict != "Block" || first.Rule != "no-rm" || first.DecisionID == "" {
		t.Errorf("record %+v", first)
	}
	if recs[1].FallbackReason != "unknown" {
		t.Errorf("a reason not of the protocol is reported as %q", recs[1].FallbackReason)
	}
	if n := r.counter(t, "gate_agent_fallback_lines_rejected_total", nil); n != 3 {
		t.Errorf("%v lines rejected, want 3", n)
	}

	appendTo(t, path, "\n") // the partial line's end
	r.readSpool()
	if recs := r.recordLines(t); len(recs) != 3 || recs[2].FallbackReason != agentproto.FallbackVersion {
		t.Fatalf("after the line's end: %+v", recs)
	}
	r.readSpool()
	if n := len(r.recordLines(t)); n != 3 {
		t.Fatalf("a line was reported twice: %d records", n)
	}
	if n := r.counter(t, "gate_agent_hook_fallbacks_total", map[string]string{"reason": agentproto.FallbackTimeout, "verdict": "Block"}); n != 1 {
		t.Errorf("timeouts counted %v, want 1", n)
	}

	if err := os.WriteFile(path, []byte(fallbackLine(t, agentproto.FallbackUnreachable, "Allow")), 0o644); err != nil {
		t.Fatal(err)
	}
	r.readSpool()
	if recs := r.recordLines(t); len(recs) != 4 || recs[3].FallbackReason != agentproto.FallbackUnreachable {
		t.Fatalf("after the spool was truncated: %+v", recs)
	}

	// A line that grows past the bound before its end is rejected once, and its end skipped.
	appendTo(t, path, strings.Repeat("y", agentproto.MaxFallbackLine+1))
	r.readSpool()
	appendTo(t, path, "yyy\n"+fallbackLine(t, agentproto.FallbackTimeout, "Allow"))
	r.readSpool()
	if recs := r.recordLines(t); len(recs) != 5 || recs[4].Verdict != "Allow" {
		t.Fatalf("after an overlong line: %+v", recs)
	}
	if n := r.counter(t, "gate_agent_fallback_lines_rejected_total", nil); n != 4 {
		t.Errorf("%v lines rejected, want 4", n)
	}

	replacement := path + ".new"
	if err := os.WriteFile(replacement, []byte(fallbackLine(t, agentproto.FallbackNoVolume, "Allow")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(replacement, path); err != nil {
		t.Fatal(err)
	}
	r.readSpool()
	if recs := r.recordLines(t); len(recs) != 6 || recs[5].FallbackReason != agentproto.FallbackNoVolume {
		t.Fatalf("after the spool was replaced: %+v", recs)
	}

	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(fallbackLine(t, agentproto.FallbackArgs, "Allow")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, path); err != nil {
		t.Fatal(err)
	}
	r.readSpool()
	if n := len(r.recordLines(t)); n != 6 {
		t.Fatalf("the spool was read through a symlink: %d records", n)
	}
}

// TestGateHookWritesWhatTheSidecarReads: a decision gate-hook makes with --fallback-spool is
// reported by the sidecar with gate-hook's verdict, rule, digest and input hash.
func TestGateHookWritesWhatTheSidecarReads(t *testing.T) {
	files, snap := generation(t, 1)
	vol := gateagenttest.NewVolume(t, files)
	path := filepath.Join(t.TempDir(), "fallback.ndjson")
	if got := runGateHook(t, rm, "--snapshot", vol.SnapshotPath(), "--fallback-reason", agentproto.FallbackTimeout, "--fallback-spool", path); got.exit != 2 {
		t.Fatalf("gate-hook: %+v", got)
	}
	r := spoolServer(t, path)
	r.readSpool()
	recs := r.recordLines(t)
	sum := sha256.Sum256(rm)
	if len(recs) != 1 || recs[0].Verdict != "Block" || recs[0].Rule != "no-rm" || recs[0].Digest != snap.Digest || recs[0].Tool != "Bash" ||
		recs[0].InputSHA256 != hex.EncodeToString(sum[:]) || recs[0].InputBytes != int64(len(rm)) || recs[0].FallbackReason != agentproto.FallbackTimeout {
		t.Fatalf("records %+v", recs)
	}
}

// TestFallbackSpoolOffsetOutlivesARestart: with SpoolState, a sidecar started again reports only
// the lines its predecessor had not, and a spool replaced meanwhile from its start.
func TestFallbackSpoolOffsetOutlivesARestart(t *testing.T) {
	dir := t.TempDir()
	path, state := filepath.Join(dir, "fallback.ndjson"), filepath.Join(t.TempDir(), "fallback.offset")
	start := func() *running {
		r := &running{records: &testutil.SyncBuffer{}, reg: prometheus.NewRegistry()}
		s, err := New(Options{BundleDir: t.TempDir(), FallbackSpool: path, SpoolState: state, Records: r.records, Registerer: r.reg, Log: logr.Discard()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.records.Close) // Run would close it
		r.Server = s
		return r
	}
	appendTo(t, path, fallbackLine(t, agentproto.FallbackUnreachable, "Block")+fallbackLine(t, agentproto.FallbackTimeout, "Allow"))
	first := start()
	first.readSpool()
	if n := len(first.recordLines(t)); n != 2 {
		t.Fatalf("the first sidecar reported %d lines, want 2", n)
	}

	appendTo(t, path, fallbackLine(t, agentproto.FallbackGarbage, "Block"))
	again := start()
	again.readSpool()
	recs := again.recordLines(t)
	if len(recs) != 1 || recs[0].FallbackReason != agentproto.FallbackGarbage {
		t.Fatalf("the restarted sidecar reported %+v, want only the line written since", recs)
	}

	// Another file at the path (deleted and written anew) is read from its start.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	appendTo(t, path, fallbackLine(t, agentproto.FallbackVersion, "Ask"))
	third := start()
	third.readSpool()
	if recs := third.recordLines(t); len(recs) != 1 || recs[0].FallbackReason != agentproto.FallbackVersion {
		t.Fatalf("after the spool was replaced: %+v, want its one line", recs)
	}
}

// TestFallbackRecordsNameTheSidecarsPod: a fallback's record names the pod and namespace of the
// bundle the sidecar serves (the spool is that pod's), not anything the line says.
func TestFallbackRecordsNameTheSidecarsPod(t *testing.T) {
	vol := sampleVolume(t)
	path := filepath.Join(t.TempDir(), "fallback.ndjson")
	r := &running{records: &testutil.SyncBuffer{}, reg: prometheus.NewRegistry()}
	s, err := New(Options{BundleDir: vol.Dir, FallbackSpool: path, Records: r.records, Registerer: r.reg, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.records.Close) // Run would close it
	r.Server = s
	s.refresh(false)
	appendTo(t, path, fallbackLine(t, agentproto.FallbackUnreachable, "Block"))
	r.readSpool()
	if recs := r.recordLines(t); len(recs) != 1 || recs[0].Pod != "coding-agent-0" || recs[0].Namespace != "agents" {
		t.Fatalf("records %+v, want one naming coding-agent-0 in agents", recs)
	}
}
