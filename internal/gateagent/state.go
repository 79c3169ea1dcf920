package gateagent

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/intutic/gate-operator/internal/gate"
)

// policyFor returns the policy that decides a request loaded the key's way, and the version of
// the volume it was loaded from: the version ..data names now, reloaded first when that is not
// the one loaded, so the answer is for the version the client has just seen (unless the volume
// changed in between; the client then sees another version in the answer and does not use it).
func (s *Server) policyFor(key policyKey) (string, *loadedPolicy) {
	v := readVersion(s.dir)
	if b := s.state.Load(); b != nil && b.version == v && v != NoVersion {
		if lp := b.policies[key]; lp != nil {
			return v, lp
		}
	}
	s.loadMu.Lock()
	s.remember(key)
	s.loadMu.Unlock()
	return s.load([]policyKey{key}, false)
}

// load loads the keys' policies of the version of the volume in force, those not loaded yet
// (and those that failed, with retryFailed), and publishes them. It returns the version and the
// policy of the first key. One load runs at a time: requests that find their version missing
// wait for it rather than each loading it.
//
// A version is what ..data names before and after the files are read: kubelet names each
// version anew, so when both agree the files are that version's. When they keep changing the
// first key's policy is the unstable refusal, under NoVersion, and nothing is published.
func (s *Server) load(keys []policyKey, retryFailed bool) (string, *loadedPolicy) {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	for range maxLoadAttempts {
		v := readVersion(s.dir)
		b := s.state.Load()
		current := b != nil && b.version == v && v != NoVersion
		loaded := map[policyKey]*loadedPolicy{}
		for _, k := range keys {
			if current {
				if lp := b.policies[k]; lp != nil && (lp.failure == nil || !retryFailed) {
					continue
				}
			}
			loaded[k] = loadPolicy(s.dir, k)
		}
		if len(loaded) == 0 {
			return v, b.policies[keys[0]]
		}
		if readVersion(s.dir) != v {
			s.metrics.reloads.WithLabelValues("unstable").Inc()
			continue
		}
		s.publish(v, b, loaded)
		if lp := loaded[keys[0]]; lp != nil {
			return v, lp
		}
		return v, b.policies[keys[0]]
	}
	s.log.Info("the policy volume kept changing while it was read; calls are answered under no version, so the client hands them to gate-hook", "dir", s.dir)
	return NoVersion, unstable
}

// publish puts the policies loaded from version v in force, with those of prev still kept when
// prev is the same version, and counts and logs each load. Called with loadMu held.
func (s *Server) publish(v string, prev *bundle, loaded map[policyKey]*loadedPolicy) {
	next := &bundle{version: v, policies: map[policyKey]*loadedPolicy{}}
	if prev != nil && prev.version == v {
		maps.Copy(next.policies, prev.policies)
	}
	for k, lp := range loaded {
		makeRoom(next.policies, k)
		next.policies[k] = lp
		s.logLoad(v, k, lp)
	}
	s.state.Store(next)
	if prev == nil || prev.version != v {
		s.log.Info("policy volume version in force", "dir", s.dir, "version", v)
	}
	s.metrics.inForce.Reset()
	for _, lp := range next.policies {
		if lp.failure == nil {
			s.metrics.inForce.WithLabelValues(lp.metricDigest).Set(1)
		}
	}
}

func (s *Server) logLoad(v string, k policyKey, lp *loadedPolicy) {
	if lp.failure != nil {
		s.metrics.reloads.WithLabelValues("failed").Inc()
		s.log.Error(lp.failure, "policy bundle not loaded; every call it decides is refused with its code", "version", v, "layers", k.layered, "workspace", k.workspace)
		return
	}
	s.metrics.reloads.WithLabelValues("loaded").Inc()
	if lp.compileErrors != nil {
		s.log.Error(lp.compileErrors, "some rules do not compile; they block under failurePolicy Fail", "version", v, "digest", lp.metricDigest)
	}
	s.log.V(1).Info("policy bundle loaded", "version", v, "layers", k.layered, "workspace", k.workspace, "digest", lp.metricDigest)
}

// remember notes a way of loading the bundle that a request asked for, so a new version is
// loaded that way before a request asks again. Called with loadMu held.
func (s *Server) remember(k policyKey) {
	makeRoom(s.asked, k)
	s.asked[k] = struct{}{}
}

// makeRoom makes room for k in m, which holds at most maxPolicies keys, by dropping another
// key when m is full: a caller asking for many ways of loading the bundle (only the agent
// itself, talking to the socket directly, would) cannot keep its wrapper's way out for good.
func makeRoom[V any](m map[policyKey]V, k policyKey) {
	if _, ok := m[k]; ok || len(m) < maxPolicies {
		return
	}
	for other := range m {
		delete(m, other)
		return
	}
}

// askedKeys are the ways requests asked for the bundle, or, before any request, the way a
// pod's wrapper most likely will: with the layers when the bundle has an index, for any
// workspace. Called with loadMu held.
func (s *Server) askedKeys() []policyKey {
	if len(s.asked) == 0 {
		return []policyKey{{layered: s.bundleHasLayers()}}
	}
	keys := slices.Collect(maps.Keys(s.asked))
	slices.SortFunc(keys, func(a, b policyKey) int {
		if a.layered != b.layered {
			if a.layered {
				return -1
			}
			return 1
		}
		return strings.Compare(a.workspace, b.workspace)
	})
	return keys
}

// bundleHasLayers reports whether the bundle has a layers index.
func (s *Server) bundleHasLayers() bool {
	_, err := os.Stat(filepath.Join(s.dir, gate.LayersFileName))
	return err == nil
}

// refresh loads the version of the volume in force every way requests asked for it, when it
// is not loaded yet; with retryFailed, the ways that failed are loaded again too (a file that
// could not be read may be readable now). It makes the sidecar ready once a load ended, well
// or not.
func (s *Server) refresh(retryFailed bool) {
	s.loadMu.Lock()
	keys := s.askedKeys()
	s.loadMu.Unlock()
	if v, _ := s.load(keys, retryFailed); v != NoVersion || readVersion(s.dir) == NoVersion {
		s.ready.Store(true)
	}
}

// watch reloads when the bundle directory changes (kubelet swaps its ..data) and every
// interval, until ctx ends.
func (s *Server) watch(ctx context.Context, interval time.Duration) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w, err := fsnotify.NewWatcher(); err != nil {
		s.log.Error(err, "cannot watch the bundle directory; checking it periodically only", "dir", s.dir)
	} else {
		defer w.Close()
		if err := w.Add(s.dir); err != nil {
			s.log.Error(err, "cannot watch the bundle directory; checking it periodically only", "dir", s.dir)
		}
		events, errs = w.Events, w.Errors
	}
	s.refresh(false) // a change made before the watch was in place is not missed
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-events:
			s.refresh(false)
		case err := <-errs:
			s.log.Error(err, "watching the bundle directory", "dir", s.dir)
		case <-tick.C:
			s.refresh(true)
		}
	}
}
