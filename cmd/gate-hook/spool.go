package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"syscall"
	"time"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/gate"
)

// maxSpoolBytes bounds the fallback spool: past it, gate-hook appends nothing. A sidecar that
// is never reachable would otherwise let it grow with every call; the calls are decided all the
// same.
const maxSpoolBytes = 16 << 20

// fallbackSpool is where gate-hook records a decision it made because gate-client handed it
// the call (--fallback-spool), and why (--fallback-reason): the gate-agent sidecar reports
// those lines when it can, so calls decided without it are not missing from its record.
type fallbackSpool struct {
	path, reason string
}

// record appends the line of decision d to the spool, when there is one. It is best effort:
// nothing it meets changes the answer, and it prints nothing (stdout and stderr are the
// answer's).
func (s fallbackSpool) record(d gate.Decision, input []byte, runtime, tool string) {
	if s.path == "" {
		return
	}
	reason := s.reason
	if !agentproto.KnownFallbackReason(reason) {
		reason = "unknown"
	}
	mode := "enforce"
	if d.Mode() == gate.Audit {
		mode = "audit"
	}
	sum := sha256.Sum256(input)
	rec := agentproto.FallbackRecord{
		Time: time.Now().UTC().Format(time.RFC3339Nano), Reason: reason,
		Verdict: string(d.Verdict), Enforcement: mode, Code: d.Code, Rule: d.Rule, Layer: d.Layer, Runtime: runtime, Tool: tool,
		InputBytes: len(input), InputSHA256: hex.EncodeToString(sum[:]), Digest: d.SnapshotDigest, IncidentID: d.IncidentID,
	}
	line, err := json.Marshal(rec)
	if err != nil || len(line)+1 > agentproto.MaxFallbackLine {
		return
	}
	appendLine(s.path, append(line, '\n'))
}

// appendLine appends line to the file at path in one write (O_APPEND: lines of concurrent
// hooks do not interleave), creating it readable by the sidecar's user, unless the file is
// already maxSpoolBytes long. The file is the agent's to write anyway (gate-hook runs as the
// agent's user), so a symlink planted there can point nowhere the agent could not write itself.
func appendLine(path string, line []byte) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size()+int64(len(line)) > maxSpoolBytes {
		return
	}
	_, _ = f.Write(line)
}
