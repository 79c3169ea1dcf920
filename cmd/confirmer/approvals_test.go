package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/approvals"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateapi"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestReplicasAnswerApprovals runs two confirmer processes sharing ten sessions, with the human
// lane on (--confirmer-name and friends, as the SessionConfirmer renders them), against a real
// API server with the ToolApproval CRD. Every held call gets one ToolApproval; approving or
// denying them through the status subresource reaches each session exactly once with the right
// answer, whichever replica owns it. A harness call opted in over HTTP on one replica is
// followed to its answer through GET /v1/approvals/{name} on either replica.
func TestReplicasAnswerApprovals(t *testing.T) {
	cfg, kubeconfig := startAPIServer(t, true)
	dir := t.TempDir()
	scheme := runtime.NewScheme()
	_ = gatev1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testutil.Context(t, 3*time.Minute)
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}); err != nil {
		t.Fatal(err)
	}

	const key = "sk-ant-approvals-test"
	fake := anthropictest.NewTLS(key)
	t.Cleanup(fake.Close)
	fake.AcceptDuplicateConfirmations(true) // a second confirmation would show, not be refused
	deploy := anthropictest.ToolUse{Type: "agent.mcp_tool_use", MCPServer: "deploy", Name: "run", Input: map[string]any{"env": "prod"}, Permission: "ask"}
	sessions := map[string][]string{}
	for i := range 10 {
		id := fmt.Sprintf("sesn_ap%02d", i)
		sessions[id] = fake.AddSession(id, "agent_ap", deploy, deploy)
	}
	snap, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1},
		[]gate.Rule{{Name: "deploys-need-human", Tools: []string{"mcp__deploy__*"}, Action: gate.Ask, Reason: "deploys need a human"}})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := snap.Encode()
	for name, content := range map[string][]byte{gate.SnapshotFileName: data, "api-key": []byte(key), "kubeconfig": kubeconfig} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := fake.WriteCA(filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	start := func(name string) *replicaProcess {
		r := &replicaProcess{addr: freePort(t), metricsAddr: freePort(t), logs: &testutil.SyncBuffer{}, exited: make(chan error, 1)}
		r.cmd = exec.Command(bin, "--listen", r.addr, "--metrics-listen", r.metricsAddr, "--insecure-no-auth", "--snapshot", filepath.Join(dir, gate.SnapshotFileName),
			"--anthropic-base-url", fake.URL, "--anthropic-api-key-file", filepath.Join(dir, "api-key"), "--anthropic-ca-file", filepath.Join(dir, "ca.pem"),
			"--agent-ids", "agent_ap", "--poll-interval", "1s", "--kubeconfig", filepath.Join(dir, "kubeconfig"),
			"--members-lease", "agents-confirmer", "--leader-election-namespace", "agents", "--leader-election-identity", name,
			"--confirmer-name", "agents", "--confirmer-uid", "0b7e1c3a-9d7e-4c5b-8f3e-2a1b0c9d8e7f", "--namespace", "agents", "--policy", "coding-agents",
			"--human-approval-deadline", "5m")
		r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { r.exited <- r.cmd.Wait() }()
		t.Cleanup(func() {
			if r.cmd.ProcessState == nil {
				_ = r.cmd.Process.Kill()
			}
		})
		return r
	}
	a, b := start("confirmer-a"), start("confirmer-b")

	name := func(session string, i int) string {
		return approvals.Name("agents", gatev1.SurfaceManagedAgents, session, sessions[session][i], "mcp__deploy__run", approvals.InputDigest([]byte(`{"env":"prod"}`)))
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		var l gatev1.ToolApprovalList
		if err := cl.List(ctx, &l, client.InNamespace("agents")); err != nil {
			return err
		}
		if len(l.Items) != 20 {
			return fmt.Errorf("%d ToolApprovals; logs:\n%s\n%s", len(l.Items), a.logs, b.logs)
		}
		return nil
	})
	if na, nb := a.metric(`confirmer_tool_approvals_total{result="created"}`), b.metric(`confirmer_tool_approvals_total{result="created"}`); na+nb != 20 {
		t.Errorf("created %d + %d ToolApprovals, want 20 in all", na, nb)
	}
	answer := func(name string, state gatev1.ToolApprovalState, user, message string) {
		t.Helper()
		ta := &gatev1.ToolApproval{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "agents", Name: name}, ta); err != nil {
			t.Fatal(err)
		}
		ta.Status.State = state
		ta.Status.Decision = &gatev1.ToolApprovalDecision{User: user, Time: &metav1.Time{Time: time.Now()}, Message: message}
		meta.SetStatusCondition(&ta.Status.Conditions, metav1.Condition{Type: string(state), Status: metav1.ConditionTrue, Reason: "ByUser"})
		if err := cl.Status().Update(ctx, ta); err != nil {
			t.Fatal(err)
		}
	}
	for id := range sessions {
		answer(name(id, 0), gatev1.ApprovalApproved, "alice", "")
		answer(name(id, 1), gatev1.ApprovalDenied, "bob", "not today")
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		for id := range sessions {
			if p := fake.Pending(id); len(p) > 0 {
				return fmt.Errorf("%s still waits on %v", id, p)
			}
		}
		return nil
	})
	for id, calls := range sessions {
		got := map[string]string{}
		for _, c := range fake.Confirmations(id) {
			tid := c["tool_use_id"].(string)
			if _, dup := got[tid]; dup {
				t.Errorf("%s: %s confirmed twice", id, tid)
			}
			got[tid], _ = c["result"].(string)
			if dm, ok := c["deny_message"].(string); ok {
				got[tid] += ":" + dm
			}
		}
		if got[calls[0]] != "allow" || got[calls[1]] != "deny:[Intutic Governance] BLOCKED: a human denied this call: not today" {
			t.Errorf("%s: %v", id, got)
		}
	}

	// The harness lane, over HTTP: created on a, read on either.
	req, _ := http.NewRequest("POST", "http://"+a.addr+"/v1/harness/approvals", strings.NewReader(
		`{"pendingApprovals":[{"approvalId":"appr_1","toolCallId":"call_1","toolName":"mcp__deploy__run","input":"{}","kind":"custom"}],"session":"run_1"}`))
	req.Header.Set(gateapi.HeaderHumanApproval, "create")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Pending []struct {
			ApprovalName string `json:"approvalName"`
		} `json:"pending"`
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(raw, &out); err != nil || resp.StatusCode != 200 || len(out.Pending) != 1 || out.Pending[0].ApprovalName == "" {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	hname := out.Pending[0].ApprovalName
	state := func(r *replicaProcess) string {
		resp, err := http.Get("http://" + r.addr + "/v1/approvals/" + hname)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		var v struct{ State string }
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return v.State
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if sa, sb := state(a), state(b); sa != "Pending" || sb != "Pending" {
			return fmt.Errorf("a reads %q, b %q", sa, sb)
		}
		return nil
	})
	answer(hname, gatev1.ApprovalApproved, "alice", "")
	testutil.Eventually(t, 10*time.Second, func() error {
		if sa, sb := state(a), state(b); sa != "Approved" || sb != "Approved" {
			return fmt.Errorf("a reads %q, b %q", sa, sb)
		}
		return nil
	})

	for _, r := range []*replicaProcess{a, b} {
		if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := <-r.exited; err != nil {
			t.Fatalf("a replica did not stop cleanly: %v\n%s", err, r.logs)
		}
	}
}
