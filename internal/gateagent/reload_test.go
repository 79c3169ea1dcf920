package gateagent

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateagent/gateagenttest"
)

// generation is a bundle whose one rule blocks rm with a reason naming generation n.
func generation(t testing.TB, n int) (map[string][]byte, *gate.Snapshot) {
	t.Helper()
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: int64(n)}, []gate.Rule{
		{Name: "no-rm", Tools: []string{"bash"}, When: `input.command.contains("rm ")`, Action: gate.Block, Reason: fmt.Sprintf("generation %d forbids rm", n)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return gateagenttest.SnapshotFiles(t, s, nil, "coding-agent-0"), s
}

var rm = gateagenttest.Payload("Bash", map[string]any{"command": "rm -rf /tmp/x"})

func wantBlocked(t *testing.T, resp agentproto.Response, reason string) {
	t.Helper()
	if resp.Exit != 2 || !strings.Contains(string(resp.Stderr), reason) {
		t.Fatalf("want a refusal saying %q, got exit %d stderr %q", reason, resp.Exit, resp.Stderr)
	}
}

// TestReloadOnSwap: when the kubelet swaps the volume's ..data, the next call is decided with
// the new version and the answer says so, even before the watcher has seen the swap; a call
// for the old version is answered with the new one, which the client does not use; the
// watcher loads a new version before any call asks; a version that does not load refuses
// every call with its code, and the next good one decides again.
func TestReloadOnSwap(t *testing.T) {
	files, _ := generation(t, 1)
	vol := gateagenttest.NewVolume(t, files)
	v1 := vol.Version()
	r := start(t, Options{BundleDir: vol.Dir})
	resp := r.ask(t, agentproto.Request{Version: v1, Input: rm})
	wantBlocked(t, resp, "generation 1 forbids rm")
	if resp.Version != v1 {
		t.Fatalf("answered for %q, want %q", resp.Version, v1)
	}

	files, _ = generation(t, 2)
	v2 := vol.Publish(files)
	resp = r.ask(t, agentproto.Request{Version: v2, Input: rm})
	wantBlocked(t, resp, "generation 2 forbids rm")
	if resp.Version != v2 {
		t.Fatalf("after the swap, answered for %q, want %q", resp.Version, v2)
	}
	if resp := r.ask(t, agentproto.Request{Version: v1, Input: rm}); resp.Version != v2 {
		t.Fatalf("a call for the old version was answered for %q, want the version decided with, %q", resp.Version, v2)
	}

	files, s3 := generation(t, 3)
	v3 := vol.Publish(files)
	waitFor(t, "the watcher to load the new version", func() bool {
		b := r.state.Load()
		return b.version == v3 && b.policies[policyKey{}] != nil
	})
	if got := r.counter(t, "gate_agent_policy_in_force", map[string]string{"digest": s3.Digest}); got != 1 {
		t.Errorf("policy in force for %s: %v, want 1", s3.Digest, got)
	}
	if n := r.counter(t, "gate_agent_policy_reloads_total", map[string]string{"result": "loaded"}); n < 3 {
		t.Errorf("%v loads counted, want at least 3", n)
	}

	v4 := vol.Publish(map[string][]byte{gate.SnapshotFileName: []byte(`{"apiVersion":`)})
	resp = r.ask(t, agentproto.Request{Version: v4, Input: rm, Token: token})
	if resp.Exit != 2 || resp.Version != v4 || resp.Digest != "" || !strings.Contains(string(resp.Stderr), "the policy snapshot is not valid JSON") ||
		!strings.HasPrefix(string(resp.Stdout), "gate-answer "+token+"\n") {
		t.Fatalf("a corrupt version: got %+v", resp)
	}
	if got := r.counter(t, "gate_agent_policy_in_force", map[string]string{"digest": s3.Digest}); got != 0 {
		t.Errorf("the last good digest is still reported in force under a corrupt version")
	}
	recs := r.waitRecords(t, 4)
	if i := slices.IndexFunc(recs, func(rec decisionlog.Record) bool { return rec.VolumeVersion == v4 }); i < 0 ||
		recs[i].Code != gate.CodeSnapshotCorrupt || recs[i].Verdict != string(gate.Block) {
		t.Errorf("no record of the refusal under %s: %+v", v4, recs)
	}

	files, _ = generation(t, 5)
	v5 := vol.Publish(files)
	wantBlocked(t, r.ask(t, agentproto.Request{Version: v5, Input: rm}), "generation 5 forbids rm")
	if ls := r.ask(t, agentproto.Request{Version: v5, Input: gateagenttest.Payload("Bash", map[string]any{"command": "ls"})}); ls.Exit != 0 {
		t.Fatalf("ls under generation 5: %+v", ls)
	}
}

// TestAnswersMatchTheirVersion: while the volume is swapped again and again, far faster than the
// kubelet swaps it, every answer is the decision of the version it names, or a refusal under no
// version when the volume changed under each load of the call.
func TestAnswersMatchTheirVersion(t *testing.T) {
	files, _ := generation(t, 0)
	vol := gateagenttest.NewVolume(t, files)
	r := start(t, Options{BundleDir: vol.Dir})
	generations := sync.Map{}
	generations.Store(vol.Version(), 0)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var decided atomic.Int64
	failures := make(chan string, 100)
	for c := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := gateagenttest.Ask(r.socket, agentproto.Request{Nonce: gateagenttest.Nonce(c*1_000_000 + i), Runtime: agentproto.RuntimeClaudeCode, Version: "v0", Input: rm})
				if err != nil {
					failures <- err.Error()
					return
				}
				if resp.Version == NoVersion {
					// The volume changed under every load of this call; the client never uses
					// such an answer. It is a refusal all the same.
					if resp.Exit != 2 {
						failures <- fmt.Sprintf("an answer under no version exits %d", resp.Exit)
						return
					}
					continue
				}
				decided.Add(1)
				n, ok := generations.Load(resp.Version)
				if !ok {
					failures <- "an answer for version " + resp.Version + ", which was never published"
					return
				}
				if want := fmt.Sprintf("generation %d forbids rm", n); !strings.Contains(string(resp.Stderr), want) {
					failures <- fmt.Sprintf("version %s (generation %d) answered %q", resp.Version, n, resp.Stderr)
					return
				}
			}
		})
	}
	for n := 1; n <= 40; n++ {
		files, _ := generation(t, n)
		// The version is known before the swap: a request may be answered with it at once.
		generations.Store(vol.NextVersion(), n)
		vol.Publish(files)
	}
	close(stop)
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	if decided.Load() == 0 {
		t.Error("no call was answered under a version")
	}
	t.Logf("%d calls answered under a version", decided.Load())
}

// TestBrokenBundleIsReady: a sidecar whose bundle does not load is ready, and refuses every
// call with the bundle's error code rather than letting any through.
func TestBrokenBundleIsReady(t *testing.T) {
	vol := gateagenttest.NewVolume(t, map[string][]byte{gate.SnapshotFileName: []byte("not a snapshot")})
	r := start(t, Options{BundleDir: vol.Dir})
	if !r.Ready() {
		t.Fatal("not ready")
	}
	for _, tool := range []string{"Read", "TodoWrite", "mcp__github__create_issue"} {
		resp := r.ask(t, agentproto.Request{Version: vol.Version(), Input: gateagenttest.Payload(tool, map[string]any{})})
		if resp.Exit != 2 || !strings.Contains(string(resp.Stdout), `"permissionDecision":"deny"`) {
			t.Errorf("%s under a broken bundle: %+v", tool, resp)
		}
	}
	if n := r.counter(t, "gate_agent_decisions_total", map[string]string{"verdict": "Block", "code": gate.CodeSnapshotCorrupt}); n != 3 {
		t.Errorf("%v refusals counted with code %s, want 3", n, gate.CodeSnapshotCorrupt)
	}
}

// TestManyWaysOfAsking: a caller asking for the bundle under many workspaces keeps at most
// maxPolicies of them loaded, and the wrapper's own way is loaded and kept when it asks next.
func TestManyWaysOfAsking(t *testing.T) {
	files, _ := generation(t, 1)
	vol := gateagenttest.NewVolume(t, files)
	r := start(t, Options{BundleDir: vol.Dir})
	for i := range 20 {
		resp := r.ask(t, agentproto.Request{Version: vol.Version(), Workspace: fmt.Sprintf("ws_%d", i), Input: rm})
		wantBlocked(t, resp, fmt.Sprintf(`is for workspace "", not "ws_%d"`, i))
	}
	wantBlocked(t, r.ask(t, agentproto.Request{Version: vol.Version(), Input: rm}), "generation 1 forbids rm")
	b := r.state.Load()
	if len(b.policies) > maxPolicies || b.policies[policyKey{}] == nil {
		t.Fatalf("%d ways kept, the wrapper's among them: %v", len(b.policies), b.policies[policyKey{}] != nil)
	}
}
