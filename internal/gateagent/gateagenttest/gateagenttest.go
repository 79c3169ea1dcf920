// Package gateagenttest builds what tests of the gate-agent sidecar and its client need: policy
// volumes laid out as the kubelet lays them out, the sample policy and its calls, and a socket
// client.
package gateagenttest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
)

// Volume is a directory laid out as the kubelet's atomic writer publishes a ConfigMap or
// projected volume: the files in a timestamped directory, ..data a symlink to it, and each
// top-level entry a symlink through ..data. Publish swaps ..data atomically to a new directory,
// as an update of the volume does.
type Volume struct {
	Dir     string
	t       testing.TB
	n       int
	version string
	names   map[string]bool
}

// NewVolume is a volume holding files (paths relative to its root, such as "pod/name").
func NewVolume(t testing.TB, files map[string][]byte) *Volume {
	t.Helper()
	v := &Volume{Dir: t.TempDir(), t: t, names: map[string]bool{}}
	v.Publish(files)
	return v
}

// Version is where ..data points now.
func (v *Volume) Version() string { return v.version }

// NextVersion is the version the next Publish makes.
func (v *Volume) NextVersion() string { return versionName(v.n + 1) }

func versionName(n int) string { return fmt.Sprintf("..2026_12_04_22_00_%02d.%09d", n%60, n) }

// Publish makes files the volume's content, as the kubelet does: written into a new timestamped
// directory, the top-level symlinks of new names added, ..data swapped to it by a rename, the
// symlinks of gone names removed, and the previous directory removed. It returns the new
// version.
func (v *Volume) Publish(files map[string][]byte) string {
	t := v.t
	t.Helper()
	v.n++
	version := versionName(v.n)
	for name, data := range files {
		path := filepath.Join(v.Dir, version, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	top := map[string]bool{}
	for name := range files {
		top[strings.SplitN(name, "/", 2)[0]] = true
	}
	for name := range top {
		if !v.names[name] {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(v.Dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(v.Dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.Dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range v.names {
		if !top[name] {
			if err := os.Remove(filepath.Join(v.Dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if v.version != "" {
		if err := os.RemoveAll(filepath.Join(v.Dir, v.version)); err != nil {
			t.Fatal(err)
		}
	}
	v.names, v.version = top, version
	return version
}

// SnapshotPath is the path gate-hook's --snapshot names in the volume.
func (v *Volume) SnapshotPath() string { return filepath.Join(v.Dir, gate.SnapshotFileName) }

// SnapshotFiles are the files of a bundle with one snapshot: the snapshot, its checked rules
// file when there is one, and the pod's name when pod is set.
func SnapshotFiles(t testing.TB, s *gate.Snapshot, checked []byte, pod string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{gate.SnapshotFileName: Encoded(t, s)}
	if checked != nil {
		files[gate.CheckedFileName] = checked
	}
	if pod != "" {
		files[gate.PodNameFile] = []byte(pod)
	}
	return files
}

// ClusterLayer is a cluster policy's layer in a bundle and its snapshot.
type ClusterLayer struct {
	Layer gate.Layer
	Snap  *gate.Snapshot
}

// NewClusterLayer is the layer of the cluster policy name with rules, selecting pods by sel.
func NewClusterLayer(t testing.TB, name string, priority int32, rules []gate.Rule, sel ...gate.Requirement) ClusterLayer {
	t.Helper()
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: name, Generation: 1}, rules)
	if err != nil {
		t.Fatal(err)
	}
	return ClusterLayer{gate.Layer{Kind: gate.LayerKindCluster, Name: name, Priority: priority, PodSelector: sel, File: gate.ClusterLayerFile(name), Digest: s.Digest}, s}
}

// LayeredFiles are the files of a layered bundle for namespace "agents": its index, the
// namespace's snapshot when primary is set, each layer's snapshot, the pod's name, and its
// labels when set.
func LayeredFiles(t testing.TB, primary *gate.Snapshot, pod, labels string, layers ...ClusterLayer) map[string][]byte {
	t.Helper()
	files := map[string][]byte{gate.PodNameFile: []byte(pod)}
	if labels != "" {
		files[gate.PodLabelsFile] = []byte(labels)
	}
	idx := gate.LayersIndex{Namespace: "agents", Namespaced: primary != nil}
	for _, l := range layers {
		idx.Layers = append(idx.Layers, l.Layer)
		files[l.Layer.File] = Encoded(t, l.Snap)
	}
	data, err := gate.BuildLayersIndex(idx)
	if err != nil {
		t.Fatal(err)
	}
	files[gate.LayersFileName] = data
	if primary != nil {
		files[gate.SnapshotFileName] = Encoded(t, primary)
	}
	return files
}

// Encoded is the snapshot's file content.
func Encoded(t testing.TB, s *gate.Snapshot) []byte {
	t.Helper()
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Sample files, relative to a package two directories under the module's root.
const (
	samplePolicy = "config/samples/gate_v1alpha1_harnessagentpolicy.yaml"
	sampleCases  = "config/samples/cases/gate_v1alpha1_harnessagentpolicy.cases.yaml"
)

// SamplePolicy is the sample HarnessAgentPolicy's snapshot and checked rules file, as the
// bootstrap ConfigMap carries them, and its cases (the ones `gatectl test` runs) as the hook
// inputs Claude Code would send for them. root is the module's root, relative to the test.
func SamplePolicy(t testing.TB, root string) (*gate.Snapshot, []byte, []HookCall) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, samplePolicy))
	if err != nil {
		t.Fatal(err)
	}
	var hap gatev1.HarnessAgentPolicy
	if err := yaml.Unmarshal(data, &hap); err != nil {
		t.Fatal(err)
	}
	meta, rules := bootstrap.SnapshotSource(&hap)
	snap, checked, err := gate.BuildSnapshotChecked(meta, rules)
	if err != nil {
		t.Fatal(err)
	}
	if data, err = os.ReadFile(filepath.Join(root, sampleCases)); err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []struct {
			Name    string          `json:"name"`
			Tool    string          `json:"tool"`
			Server  string          `json:"server"`
			Input   json.RawMessage `json:"input"`
			Session string          `json:"session"`
			Cwd     string          `json:"cwd"`
		}
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) < 50 {
		t.Fatalf("%s: only %d cases", sampleCases, len(f.Cases))
	}
	calls := make([]HookCall, 0, len(f.Cases))
	for _, c := range f.Cases {
		p := map[string]any{"hook_event_name": "PreToolUse", "tool_name": c.Tool, "session_id": c.Session, "cwd": c.Cwd, "tool_use_id": "toolu_01"}
		if len(c.Input) > 0 {
			p["tool_input"] = c.Input
		}
		if c.Server != "" {
			p["mcp_server"] = map[string]any{"name": c.Server}
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, HookCall{Name: c.Name, Input: b})
	}
	return snap, checked, calls
}

// HookCall is a named PreToolUse hook input.
type HookCall struct {
	Name  string
	Input []byte
}

// Payload is a PreToolUse hook input as Claude Code writes it, for tool with input.
func Payload(tool string, input any) []byte {
	b, err := json.Marshal(map[string]any{
		"session_id": "9b2c1f0e-4d1a-4a57-8f0e-1c2d3e4f5a6b", "transcript_path": "/home/agent/.claude/projects/w/9b2c.jsonl",
		"cwd": "/workspace", "permission_mode": "default", "hook_event_name": "PreToolUse",
		"tool_name": tool, "tool_input": input, "tool_use_id": "toolu_01ABCDEF",
	})
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// SocketPath is a path for a Unix socket in a new directory, short enough for sun_path (108
// bytes), which a test's own temporary directory may not be.
func SocketPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ga")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "gate.sock")
}

// Ask sends req on a new connection to the socket and reads the response, within 10 seconds.
func Ask(socket string, req agentproto.Request) (agentproto.Response, error) {
	msg, err := agentproto.EncodeRequest(&req)
	if err != nil {
		return agentproto.Response{}, err
	}
	c, err := net.Dial("unix", socket)
	if err != nil {
		return agentproto.Response{}, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return agentproto.Response{}, err
	}
	if _, err := c.Write(msg); err != nil {
		return agentproto.Response{}, err
	}
	return agentproto.ReadResponse(c)
}

// Nonce is a fixed nonce for the n-th request of a test.
func Nonce(n int) string { return fmt.Sprintf("%032x", n) }
