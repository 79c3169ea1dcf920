package gateagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/runtimes"
)

// Bounds of one read of the fallback spool: the rest is read at the next.
const (
	maxSpoolRead  = 1 << 20
	maxSpoolLines = 1000
)

// spoolReader reads the fallback spool's new lines: it remembers how far it has read, and starts
// over when the file is replaced or shrinks (truncated, or deleted and written anew).
//
// The spool is written by gate-hook as the agent's user, so everything in it is untrusted: it
// is opened without following a symlink and only when it is a regular file, a line longer
// than agentproto.MaxFallbackLine or that is not a FallbackRecord is skipped, and what is
// reported is marked as the hook's.
type spoolReader struct {
	path   string
	offset int64
	// file is the spool last read: another file at the path is read from its start.
	file os.FileInfo
	// skipping is set while the rest of an overlong line is being skipped.
	skipping bool
	// statePath, unless empty, keeps how far the spool was read across restarts of the
	// sidecar: a file in a directory only the sidecar can write (its socket's emptyDir, which
	// outlives the container), so a restarted sidecar does not report the same lines again.
	statePath string
	// resumed is set once the state was read back, at the first read.
	resumed bool
}

// spoolState is what statePath holds: the spool file (device and inode) and the offset read
// up to in it.
type spoolState struct {
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Offset int64  `json:"offset"`
}

// resume sets the offset from statePath when it names fi, the spool as it is now, and fi has
// not shrunk below it; a missing or unreadable state reads the spool from its start.
func (r *spoolReader) resume(fi os.FileInfo) {
	r.resumed = true
	if r.statePath == "" {
		return
	}
	data, err := os.ReadFile(r.statePath)
	if err != nil {
		return
	}
	var st spoolState
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if json.Unmarshal(data, &st) != nil || !ok || st.Dev != sys.Dev || st.Ino != sys.Ino || st.Offset < 0 || st.Offset > fi.Size() {
		return
	}
	r.file, r.offset = fi, st.Offset
}

// save writes the offset read up to in fi to statePath, atomically.
func (r *spoolReader) save(fi os.FileInfo) error {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if r.statePath == "" || !ok {
		return nil
	}
	data, err := json.Marshal(spoolState{Dev: sys.Dev, Ino: sys.Ino, Offset: r.offset})
	if err != nil {
		return err
	}
	tmp := r.statePath + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, r.statePath)
}

// read reads the new complete lines, up to maxSpoolLines and maxSpoolRead bytes, and hands each
// well-formed one to emit; it returns how many it rejected.
func (r *spoolReader) read(emit func(agentproto.FallbackRecord)) (rejected int, err error) {
	fd, err := syscall.Open(r.path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil // no fallback yet
	}
	if err != nil {
		return 0, &fs.PathError{Op: "open", Path: r.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), r.path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, &fs.PathError{Op: "read", Path: r.path, Err: errors.New("not a regular file")}
	}
	if !r.resumed {
		r.resume(fi)
	}
	if r.file == nil || !os.SameFile(r.file, fi) || fi.Size() < r.offset {
		r.offset, r.skipping = 0, false
	}
	r.file = fi
	if fi.Size() == r.offset {
		return 0, nil
	}
	buf := make([]byte, min(fi.Size()-r.offset, maxSpoolRead))
	n, err := f.ReadAt(buf, r.offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	buf = buf[:n]
	consumed, lines := 0, 0
	for lines < maxSpoolLines {
		i := bytes.IndexByte(buf[consumed:], '\n')
		if i < 0 {
			// No whole line left: wait for the rest, unless it is already too long to be one.
			if rest := len(buf) - consumed; rest >= agentproto.MaxFallbackLine {
				if !r.skipping {
					rejected++
				}
				r.skipping, consumed = true, len(buf)
			}
			break
		}
		line := buf[consumed : consumed+i]
		consumed += i + 1
		if r.skipping {
			r.skipping = false // the end of an overlong line, already counted
			continue
		}
		lines++
		rec, ok := parseFallback(line)
		if !ok {
			rejected++
			continue
		}
		emit(rec)
	}
	r.offset += int64(consumed)
	if consumed > 0 {
		if err := r.save(fi); err != nil {
			return rejected, fmt.Errorf("keeping the spool's offset: %w", err)
		}
	}
	return rejected, nil
}

// parseFallback parses one spool line, strictly: every field known, of the shape gate-hook
// writes.
func parseFallback(line []byte) (agentproto.FallbackRecord, bool) {
	var rec agentproto.FallbackRecord
	if len(line)+1 > agentproto.MaxFallbackLine {
		return rec, false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil || dec.More() {
		return rec, false
	}
	if _, err := time.Parse(time.RFC3339Nano, rec.Time); err != nil {
		return rec, false
	}
	switch gate.Verdict(rec.Verdict) {
	case gate.Allow, gate.Ask, gate.Block:
	default:
		return rec, false
	}
	if rec.Enforcement != "enforce" && rec.Enforcement != "audit" || rec.InputBytes < 0 || !isSHA256Hex(rec.InputSHA256) {
		return rec, false
	}
	if !agentproto.KnownFallbackReason(rec.Reason) {
		rec.Reason = "unknown"
	}
	return rec, true
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// reportFallbacks reads the fallback spool now and every SpoolInterval until ctx ends, and
// reports each new line once: as a record the hook reported (untrusted), and in the count of
// fallbacks. With Options.SpoolState, the offset read up to outlives a restart of the sidecar;
// without it, a restarted sidecar reports the spool's lines again.
func (s *Server) reportFallbacks(ctx context.Context) {
	tick := time.NewTicker(s.opts.SpoolInterval)
	defer tick.Stop()
	for {
		s.readSpool()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// readSpool reads the fallback spool once and reports what it found.
func (s *Server) readSpool() {
	now := decisionlog.Now()
	pod, namespace := s.identity()
	rejected, err := s.spool.read(func(f agentproto.FallbackRecord) {
		s.metrics.fallbacks.WithLabelValues(f.Reason, f.Verdict).Inc()
		rec := decisionlog.Record{
			Schema: decisionlog.Schema, Time: f.Time, DecisionID: f.IncidentID, Surface: decisionlog.SurfaceHookFallback, ReportedBy: decisionlog.ReportedByHook,
			Untrusted: true, ReportedAt: now, FallbackReason: f.Reason, Runtime: spooledRuntime(f.Runtime),
			Digest: f.Digest, Layer: f.Layer, Rule: f.Rule, Verdict: f.Verdict, Enforcement: f.Enforcement, Code: f.Code,
			Tool: f.Tool, InputBytes: int64(f.InputBytes), InputSHA256: f.InputSHA256,
			// The sidecar's own pod and namespace, not the line's: the spool is this pod's.
			Pod: pod, Namespace: namespace,
		}
		if rec.DecisionID == "" {
			rec.DecisionID = gate.NewIncidentID()
		}
		s.records.Write(rec)
	})
	if rejected > 0 {
		s.metrics.spoolRejected.Add(float64(rejected))
		s.log.Info("fallback spool lines rejected (too long or malformed)", "lines", rejected, "path", s.spool.path)
	}
	if err != nil {
		s.log.Error(err, "reading the fallback spool", "path", s.spool.path)
	}
}

// identity is the pod the sidecar serves and its namespace, as the bundle in force names them
// (the pod's name file beside it when none is loaded).
func (s *Server) identity() (pod, namespace string) {
	if b := s.state.Load(); b != nil {
		for _, lp := range b.policies {
			if lp.failure == nil {
				return lp.caller.Pod, lp.namespace
			}
		}
	}
	return gate.PodCaller(s.dir).Pod, ""
}

// spooledRuntime is the runtime of a spool line: the one it names when the sidecar knows it,
// Claude Code's when it names none (a gate-hook from before the others), "unknown" otherwise.
// The agent can write the spool, so nothing it wrote there is reported unchecked.
func spooledRuntime(name string) string {
	if name == "" {
		return runtimes.Default
	}
	if _, ok := runtimes.Lookup(name); !ok {
		return "unknown"
	}
	return name
}
