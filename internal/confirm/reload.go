package confirm

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"

	"github.com/intutic/gate-operator/internal/gate"
)

// Reloader keeps a Gate on the snapshot file. Kubelet updates a ConfigMap volume by swapping
// the ..data symlink in its directory, so the directory is watched, and the file is also
// re-checked every Interval. A new snapshot that does not verify keeps the one in force (it
// is logged and counted); only while none was ever loaded does the failure stand, so the
// gate refuses with its code.
type Reloader struct {
	Gate      *gate.Gate
	Path      string
	Workspace string
	Interval  time.Duration
	Log       logr.Logger
	Metrics   *Metrics

	mu     sync.Mutex
	digest string
}

// Load reads the snapshot once; the first call decides whether the gate starts with a policy.
//
// A bundle that carries cluster layers (its layers index beside the snapshot) is decided with
// all of them: the confirmer and the gate API have no pod, so every cluster policy selecting
// the bundle's namespace applies, whatever its podSelector (gate.LoadLayeredNoPod). The index
// is looked for on every load, so a bundle that gains or loses layers is followed without a
// restart.
func (r *Reloader) Load() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	dir := filepath.Dir(r.Path)
	if _, err := os.Stat(filepath.Join(dir, gate.LayersFileName)); err == nil {
		return r.loadLayered(dir)
	}
	s, err := gate.LoadSnapshotFile(r.Path, r.Workspace)
	if err != nil {
		if r.digest == "" {
			// Nothing good in force yet: the failure stands, and every call is refused with it.
			_ = r.Gate.LoadFile(r.Path)
		}
		r.count("rejected")
		r.Log.Error(err, "policy snapshot not loaded; the snapshot in force stays", "path", r.Path, "inForce", r.digest)
		return err
	}
	if s.Digest == r.digest {
		return nil
	}
	p, errs := gate.Compile(s)
	if len(errs) > 0 {
		r.Log.Error(errs, "some rules of the new snapshot do not compile; they block under failurePolicy Fail", "digest", s.Digest)
	}
	r.Gate.Swap(p)
	r.digest = s.Digest
	r.count("loaded")
	if r.Metrics != nil {
		r.Metrics.SnapshotInForce.Reset()
		r.Metrics.SnapshotInForce.WithLabelValues(s.Digest).Set(1)
	}
	r.Log.Info("policy snapshot in force", "digest", s.Digest, "policy", s.Policy, "generation", s.Generation, "rules", len(s.Rules))
	return nil
}

// loadLayered is Load for a layered bundle; r.mu is held.
func (r *Reloader) loadLayered(dir string) error {
	set, err := gate.LoadLayeredNoPod(dir, r.Workspace)
	if err != nil {
		if r.digest == "" {
			r.Gate.Fail(err) // nothing good in force yet: every call is refused with it
		}
		r.count("rejected")
		r.Log.Error(err, "layered policy bundle not loaded; the policy in force stays", "dir", dir, "inForce", r.digest)
		return err
	}
	key := set.Fingerprint()
	if key == r.digest {
		return nil
	}
	r.Gate.SwapLayered(set.Compile())
	r.digest = key
	r.count("loaded")
	if r.Metrics != nil {
		r.Metrics.SnapshotInForce.Reset()
		r.Metrics.SnapshotInForce.WithLabelValues(set.Index.Digest).Set(1)
	}
	r.Log.Info("layered policy bundle in force", "index", set.Index.Digest, "layers", set.Layers())
	return nil
}

// Digest is the digest of the snapshot in force, "" when none was loaded. For a layered
// bundle it is the set's fingerprint (gate.LayerSet.Fingerprint).
func (r *Reloader) Digest() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.digest
}

func (r *Reloader) count(result string) {
	if r.Metrics != nil {
		r.Metrics.SnapshotReloads.WithLabelValues(result).Inc()
	}
}

// Run reloads on changes until ctx ends.
func (r *Reloader) Run(ctx context.Context) error {
	if r.Interval <= 0 {
		r.Interval = 10 * time.Second
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(r.Path)); err != nil {
		r.Log.Error(err, "cannot watch the snapshot directory; polling only", "dir", filepath.Dir(r.Path))
	}
	_ = r.Load() // a change made before the watch was in place is not missed
	tick := time.NewTicker(r.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.Events:
			_ = r.Load()
		case err := <-w.Errors:
			r.Log.Error(err, "watching the snapshot directory")
		case <-tick.C:
			_ = r.Load()
		}
	}
}
