package main

// gate-hook decides without CEL what the prefilters decide alone and hands the rest to
// gate-hook-cel. These tests hold both paths to the gate the cluster runs, call by call, on the
// sample policy's cases (config/samples, the file `gatectl test` reads) and on the same calls
// under this package's tool-by-tool policy, whose prefilters rule most rules out.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/claudecode"
)

const (
	samplePolicy = "../../config/samples/gate_v1alpha1_harnessagentpolicy.yaml"
	sampleCases  = "../../config/samples/cases/gate_v1alpha1_harnessagentpolicy.cases.yaml"
)

// sampleCase is the part of a `gatectl test` case a hook call is made of.
type sampleCase struct {
	Name   string          `json:"name"`
	Tool   string          `json:"tool"`
	Server string          `json:"server"`
	Input  json.RawMessage `json:"input"`
	// Session and Cwd are the hook's; the surface is always the hook here.
	Session string `json:"session"`
	Cwd     string `json:"cwd"`
	Caller  struct {
		Pod string `json:"pod"`
	} `json:"caller"`
}

// hookCall is a case as Claude Code would send it to gate-hook.
func (c sampleCase) hookCall() []byte {
	p := map[string]any{"hook_event_name": "PreToolUse", "tool_name": c.Tool, "session_id": c.Session, "cwd": c.Cwd, "tool_use_id": "toolu_01"}
	if len(c.Input) > 0 {
		p["tool_input"] = c.Input
	}
	if c.Server != "" {
		p["mcp_server"] = map[string]any{"name": c.Server}
	}
	b, _ := json.Marshal(p)
	return b
}

func loadSamples(t *testing.T) (*gate.Snapshot, []sampleCase) {
	t.Helper()
	data, err := os.ReadFile(samplePolicy)
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
	checkedFiles[snap] = checked
	if data, err = os.ReadFile(sampleCases); err != nil {
		t.Fatal(err)
	}
	var f struct{ Cases []sampleCase }
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) < 50 {
		t.Fatalf("%s: only %d cases", sampleCases, len(f.Cases))
	}
	return snap, f.Cases
}

// policies are the snapshots the cases are decided under: the sample policy's, and this
// package's tool-by-tool rules (policyRules), whose prefilters gate-hook can use alone.
func policies(t *testing.T) (map[string]*gate.Snapshot, []sampleCase) {
	sample, cases := loadSamples(t)
	toolByTool, checked, err := gate.BuildSnapshotChecked(gate.PolicyMeta{Policy: "agents/tool-by-tool", Generation: 1}, policyRules())
	if err != nil {
		t.Fatal(err)
	}
	checkedFiles[toolByTool] = checked
	return map[string]*gate.Snapshot{"sample": sample, "tool-by-tool": toolByTool}, cases
}

// checkedFiles are the checked rules files of the snapshots built here.
var checkedFiles = map[*gate.Snapshot][]byte{}

// writeHookDir writes a snapshot, its checked rules file and the pod's name beside it when
// there are, as the pod's volume holds them; it returns the snapshot's path.
func writeHookDir(t *testing.T, s *gate.Snapshot, pod string) string {
	t.Helper()
	path := writeHookDirSource(t, s, pod)
	if checked := checkedFiles[s]; checked != nil {
		if err := os.WriteFile(filepath.Join(filepath.Dir(path), gate.CheckedFileName), checked, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// writeHookDirSource is writeHookDir without the checked rules file: gate-hook-cel compiles
// the rules from their source.
func writeHookDirSource(t *testing.T, s *gate.Snapshot, pod string) string {
	t.Helper()
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if pod != "" {
		if err := os.MkdirAll(filepath.Join(dir, "pod"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, gate.PodNameFile), []byte(pod), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, gate.SnapshotFileName)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// clusterGates are the cluster's gates of the snapshots, loaded once each.
var clusterGates = map[*gate.Snapshot]*gate.Gate{}

// clusterDecision is the decision of the gate the cluster runs (every rule compiled, as the
// confirmer and `gatectl test` load it) on the call gate-hook reads from stdin, and what
// gate-hook-cel decides with the rules of the call's tool.
func clusterDecision(t *testing.T, s *gate.Snapshot, snapPath string, stdin []byte) (gate.Decision, gate.Decision) {
	t.Helper()
	call, _, err := claudecode.ParseHookInput(stdin)
	if err != nil {
		// Input the hook cannot read (some cases hold such on purpose) is refused unjudged.
		d := gate.Refuse(gate.CodeInputInvalid, err.Error())
		return d, d
	}
	call.Caller = gate.PodCaller(filepath.Dir(snapPath))
	g, ok := clusterGates[s]
	if !ok {
		data, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		g = gate.New("")
		if err := g.Load(data); err != nil {
			t.Fatal(err)
		}
		clusterGates[s] = g
	}
	p, _ := gate.CompileFor(s, call.Tool, call.Server)
	return g.Decide(call), p.Decide(call)
}

func sameDecision(a, b gate.Decision) bool {
	a.IncidentID, b.IncidentID = "", ""
	return reflect.DeepEqual(a, b)
}

// TestDecideWithoutCELAgrees: on every case, a decision made without CEL is the one the cluster's
// gate makes; and the tool-by-tool policy's prefilters decide most of the calls alone.
func TestDecideWithoutCELAgrees(t *testing.T) {
	snaps, cases := policies(t)
	for name, s := range snaps {
		decided := 0
		for _, c := range cases {
			stdin := c.hookCall()
			snapPath := writeHookDir(t, s, c.Caller.Pod)
			cluster, hook := clusterDecision(t, s, snapPath, stdin)
			if !sameDecision(cluster, hook) {
				t.Errorf("%s/%s: gate-hook-cel decides %+v, the cluster's gate %+v", name, c.Name, hook, cluster)
			}
			call, _, err := claudecode.ParseHookInput(stdin)
			if err != nil {
				continue
			}
			call.Caller = gate.PodCaller(filepath.Dir(snapPath))
			p, _ := gate.CompileFor(s, call.Tool, call.Server)
			d, ok := p.DecideWithoutCEL(call)
			if !ok {
				continue
			}
			decided++
			if !sameDecision(d, cluster) {
				t.Errorf("%s/%s: decided without CEL %+v, with CEL %+v", name, c.Name, d, cluster)
			}
		}
		t.Logf("%s: %d of %d cases decided without CEL", name, decided, len(cases))
		if name == "tool-by-tool" && decided < len(cases)/2 {
			t.Errorf("%s: only %d of %d cases decided without CEL", name, decided, len(cases))
		}
	}
}

// TestBinariesAgree runs every case through gate-hook as the images ship it (with gate-hook-cel
// beside it, the checked rules file beside the snapshot or not) and through gate-hook alone (no gate-hook-cel to hand off to): the first answers
// exactly as the cluster's gate decides, the second too, or refuses because it could not hand
// the call off. Neither ever answers otherwise.
func TestBinariesAgree(t *testing.T) {
	lone := filepath.Join(t.TempDir(), "gate-hook")
	if err := installCopy(hookBin, filepath.Dir(lone), "gate-hook"); err != nil {
		t.Fatal(err)
	}
	snaps, cases := policies(t)
	for name, s := range snaps {
		alone := 0
		for _, c := range cases {
			stdin := c.hookCall()
			snapPath := writeHookDir(t, s, c.Caller.Pod)
			cluster, _ := clusterDecision(t, s, snapPath, stdin)
			out, msg, exit := claudecode.HookResponse(cluster, false)
			want := result{string(out), msg, exit}
			if msg != "" {
				want.stderr = msg + "\n"
			}
			if got := runBinary(t, hookBin, stdin, snapPath); got != want {
				t.Errorf("%s/%s: gate-hook answers %+v, the cluster's gate %+v", name, c.Name, got, want)
			}
			if got := runBinary(t, hookBin, stdin, writeHookDirSource(t, s, c.Caller.Pod)); got != want {
				t.Errorf("%s/%s: gate-hook without the checked rules answers %+v, the cluster's gate %+v", name, c.Name, got, want)
			}
			got := runBinary(t, lone, stdin, snapPath)
			switch {
			case got == want:
				alone++
			case got.exit != 2 || !strings.Contains(got.stderr, "gate-hook could not start gate-hook-cel"):
				t.Errorf("%s/%s: gate-hook alone answers %+v, want %+v or a refusal to hand off", name, c.Name, got, want)
			}
		}
		t.Logf("%s: gate-hook alone answered %d of %d cases", name, alone, len(cases))
	}
}

func runBinary(t *testing.T, bin string, stdin []byte, snapPath string) result {
	t.Helper()
	return execBinary(t, bin, stdin, nil, "--snapshot", snapPath)
}

// TestHookLinksNoCEL: gate-hook as the images ship it does not link cel-go (under either module
// path), which is what makes it start about as fast as a no-op binary; gate-hook-cel does.
func TestHookLinksNoCEL(t *testing.T) {
	for _, tc := range []struct {
		bin  string
		want bool
	}{{hookBin, false}, {celBin, true}} {
		out, err := exec.Command("go", "version", "-m", tc.bin).CombinedOutput()
		if err != nil {
			t.Fatalf("go version -m %s: %v\n%s", tc.bin, err, out)
		}
		if got := strings.Contains(string(out), "cel-go"); got != tc.want {
			t.Errorf("%s links cel-go: %v, want %v\n%s", filepath.Base(tc.bin), got, tc.want, out)
		}
	}
}

// TestSampleEverydayCallsNeedNoCEL: under the sample policy, calls no rule is about (task
// lists, sub-agents, questions, web searches, MCP tools other than deploys) are decided without
// CEL, and allowed; the calls its rules are about are not.
func TestSampleEverydayCallsNeedNoCEL(t *testing.T) {
	snap, _ := loadSamples(t)
	for _, tc := range []struct {
		tool  string
		input map[string]any
		lean  bool
	}{
		{"TodoWrite", map[string]any{"todos": []any{map[string]any{"content": "a", "status": "pending", "activeForm": "doing a"}}}, true},
		{"Task", map[string]any{"description": "d", "prompt": "p", "subagent_type": "general-purpose"}, true},
		{"AskUserQuestion", map[string]any{"questions": []any{}}, true},
		{"WebSearch", map[string]any{"query": "cel-go"}, true},
		{"mcp__github__create_issue", map[string]any{"title": "t"}, true},
		{"Bash", map[string]any{"command": "ls"}, false},
		{"Read", map[string]any{"file_path": "/workspace/a.go"}, false},
		{"WebFetch", map[string]any{"url": "https://github.com/x"}, false},
		{"mcp__deploy__run", map[string]any{"environment": "staging"}, false},
	} {
		call := &gate.Call{Tool: tc.tool, Input: tc.input, Surface: gate.SurfaceHook, Cwd: "/workspace"}
		p, _ := gate.CompileFor(snap, call.Tool, call.Server)
		d, ok := p.DecideWithoutCEL(call)
		if ok != tc.lean || ok && d.Verdict != gate.Allow {
			t.Errorf("%s: decided without CEL %v (%+v), want %v", tc.tool, ok, d, tc.lean)
		}
	}
}
