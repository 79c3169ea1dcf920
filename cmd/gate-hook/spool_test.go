package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/gate"
)

// spoolLines reads the fallback spool's lines, strictly.
func spoolLines(t *testing.T, path string) []agentproto.FallbackRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []agentproto.FallbackRecord
	for line := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
		var rec agentproto.FallbackRecord
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("spool line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

// TestFallbackSpool: started by gate-client as its fall-back, gate-hook answers exactly as it
// does without the flags, on every path (a decision without CEL, one handed to gate-hook-cel,
// its own refusals), and appends one line per call to the spool saying what it decided and
// why it was asked, with the input's size and hash and never the input.
func TestFallbackSpool(t *testing.T) {
	snap := writeSnapshot(t, "")
	data, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	snapDigest := func() string {
		s, err := gate.LoadSnapshot(data, "")
		if err != nil {
			t.Fatal(err)
		}
		return s.Digest
	}()
	for _, tc := range []struct {
		name               string
		stdin              []byte
		args               []string
		verdict, rule      string
		code, tool, digest string
		reason, wantReason string
	}{
		{"allowed without CEL", payload("Read", map[string]any{"file_path": "/workspace/a.go"}, nil), []string{"--snapshot", snap}, "Allow", "", "", "Read", snapDigest, agentproto.FallbackTimeout, agentproto.FallbackTimeout},
		{"blocked by a rule without when", payload("TaskStop", map[string]any{"task_id": "t1"}, nil), []string{"--snapshot", snap}, "Block", "no-task-stop", "", "TaskStop", snapDigest, agentproto.FallbackUnreachable, agentproto.FallbackUnreachable},
		{"blocked with CEL, by gate-hook-cel", payload("Bash", map[string]any{"command": "rm -rf / " + secret}, nil), []string{"--snapshot", snap, "--answer-token", "t-1"}, "Block", "no-root-rm", "destructive_command", "Bash", snapDigest, agentproto.FallbackVersion, agentproto.FallbackVersion},
		{"asked with CEL", payload("WebFetch", map[string]any{"url": "https://paste.example/raw", "prompt": secret}, nil), []string{"--snapshot", snap, "--explicit-allow"}, "Ask", "fetch-needs-human", "", "WebFetch", snapDigest, agentproto.FallbackGarbage, agentproto.FallbackGarbage},
		{"no snapshot", payload("Bash", map[string]any{"command": "ls"}, nil), []string{"--snapshot", filepath.Join(t.TempDir(), "absent")}, "Block", "", gate.CodeSnapshotMissing, "Bash", "", agentproto.FallbackNoVolume, agentproto.FallbackNoVolume},
		{"malformed input", []byte(`{"tool_name":`), []string{"--snapshot", snap}, "Block", "", gate.CodeInputInvalid, "", "", agentproto.FallbackArgs, agentproto.FallbackArgs},
		{"a reason not of the protocol", payload("Read", map[string]any{"file_path": "/w/a.go"}, nil), []string{"--snapshot", snap}, "Allow", "", "", "Read", snapDigest, "because", "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spool := filepath.Join(t.TempDir(), "fallback.ndjson")
			plain := runHook(t, tc.stdin, nil, tc.args...)
			got := runHook(t, tc.stdin, nil, append([]string{"--fallback-reason", tc.reason, "--fallback-spool", spool}, tc.args...)...)
			if got != plain {
				t.Fatalf("with the spool gate-hook answers %+v, without %+v", got, plain)
			}
			raw, _ := os.ReadFile(spool)
			if strings.Contains(string(raw), secret) {
				t.Fatalf("the spool holds the input: %s", raw)
			}
			lines := spoolLines(t, spool)
			if len(lines) != 1 {
				t.Fatalf("%d spool lines, want 1: %+v", len(lines), lines)
			}
			l := lines[0]
			sum := sha256.Sum256(tc.stdin)
			if l.Reason != tc.wantReason || l.Verdict != tc.verdict || l.Rule != tc.rule || l.Code != tc.code || l.Tool != tc.tool || l.Digest != tc.digest ||
				l.Enforcement != "enforce" || l.InputBytes != len(tc.stdin) || l.InputSHA256 != hex.EncodeToString(sum[:]) || l.IncidentID == "" {
				t.Fatalf("spool line %+v", l)
			}
			if when, err := time.Parse(time.RFC3339Nano, l.Time); err != nil || time.Since(when) > time.Minute {
				t.Fatalf("time %q: %v", l.Time, err)
			}
		})
	}
}

// TestSpoolNeverChangesTheAnswer: a spool that cannot be written, or is full, changes nothing
// gate-hook prints or how it exits, and a full one is not appended to.
func TestSpoolNeverChangesTheAnswer(t *testing.T) {
	snap := writeSnapshot(t, "")
	full := filepath.Join(t.TempDir(), "full.ndjson")
	if err := os.WriteFile(full, make([]byte, maxSpoolBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	linkDir := t.TempDir()
	for name, spool := range map[string]string{
		"a directory":       t.TempDir(),
		"in no directory":   filepath.Join(t.TempDir(), "absent", "fallback.ndjson"),
		"full":              full,
		"a dangling target": filepath.Join(linkDir, "fallback.ndjson"),
	} {
		t.Run(name, func(t *testing.T) {
			if name == "a dangling target" {
				if err := os.Symlink(filepath.Join(linkDir, "absent-dir", "x"), spool); err != nil {
					t.Fatal(err)
				}
			}
			for _, stdin := range [][]byte{payload("Bash", map[string]any{"command": "rm -rf /"}, nil), payload("Read", map[string]any{"file_path": "/w/a"}, nil)} {
				plain := runHook(t, stdin, nil, "--snapshot", snap)
				if got := runHook(t, stdin, nil, "--fallback-reason", agentproto.FallbackTimeout, "--fallback-spool", spool, "--snapshot", snap); got != plain {
					t.Fatalf("with spool %s gate-hook answers %+v, without %+v", spool, got, plain)
				}
			}
		})
	}
	if fi, err := os.Stat(full); err != nil || fi.Size() != maxSpoolBytes {
		t.Fatalf("the full spool was appended to: %v %v", fi.Size(), err)
	}
}
