package gateagent

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/approvals"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateagent/gateagenttest"
	"github.com/intutic/gate-operator/internal/gateapi"
)

// podReviewer reviews the one token of the test's pod as a kube-apiserver reviews a projected
// token bound to it.
type podReviewer struct{}

func (podReviewer) Create(_ context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	out := tr.DeepCopy()
	if tr.Spec.Token == "pod-token" {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences, User: authenticationv1.UserInfo{
			Username: "system:serviceaccount:agents:coding-agent",
			Extra:    map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"coding-agent-0"}, "authentication.kubernetes.io/pod-uid": {"uid-0"}},
		}}
	}
	return out, nil
}

// confirmerFor serves the confirmer's gate API with the human lane for policy agents/<policy>,
// its ToolApprovals on controller-runtime's fake client.
func confirmerFor(t *testing.T, policy string) (*httptest.Server, client.Client) {
	t.Helper()
	s := runtime.NewScheme()
	if err := gatev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&gatev1.ToolApproval{}).Build()
	api := &gateapi.API{Gate: gate.New(""), Log: logr.Discard(),
		Auth: &gateapi.Authenticator{Reviewer: podReviewer{}, Allowed: []string{"agents/coding-agent"}},
		Approvals: &approvals.Store{Client: cl, Reader: cl, Namespace: "agents", Confirmer: "agents", ConfirmerUID: "uid-1", Policy: policy,
			Deadline: 15 * time.Minute, Log: logr.Discard()}}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv, cl
}

// answerApproval records a human's answer on the ToolApproval name, as kubectl gate does:
// settled with its condition, the approver in status.decision.
func answerApproval(t *testing.T, cl client.Client, name string, state gatev1.ToolApprovalState, user, message string) {
	t.Helper()
	ctx := context.Background()
	ta := &gatev1.ToolApproval{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "agents", Name: name}, ta); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := ta.Settle(state, state.ApproverReason(), "", now); err != nil {
		t.Fatal(err)
	}
	ta.Status.Decision = &gatev1.ToolApprovalDecision{User: user, Message: message, Time: &metav1.Time{Time: now}}
	if err := cl.Status().Update(ctx, ta); err != nil {
		t.Fatal(err)
	}
}

// TestHumanLane: an Ask of a Claude Code call is held ("defer") while its ToolApproval is
// pending, the resumed call is answered from it (an approval is an allow spelled out, a denial
// a deny with the approver's message), and each answer's record names the approval. The
// confirmer is the real gate API on a fake API server.
func TestHumanLane(t *testing.T) {
	kubectl := gate.Rule{Name: "kubectl-needs-human", Tools: []string{"bash"}, When: `input.command.startsWith("kubectl ")`, Action: gate.Ask, Reason: "kubectl changes the cluster"}
	snap, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1}, []gate.Rule{kubectl})
	if err != nil {
		t.Fatal(err)
	}
	vol := gateagenttest.NewVolume(t, gateagenttest.SnapshotFiles(t, snap, nil, "coding-agent-0"))
	confirmer, cl := confirmerFor(t, "coding-agents")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("pod-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := start(t, Options{BundleDir: vol.Dir, HumanLane: &HumanLane{URL: confirmer.URL, TokenFile: tokenFile}})
	apply := gateagenttest.Payload("Bash", map[string]any{"command": "kubectl apply -f prod.yaml"})
	ask := func(input []byte) hookAnswer {
		t.Helper()
		return answerOf(r.ask(t, agentproto.Request{Version: vol.Version(), Token: token, Input: input}))
	}
	answerLine := "gate-answer " + token + "\n"

	for range 2 { // the first call, then the session resumed before anyone answered
		got := ask(apply)
		if got.exit != 0 || !strings.HasPrefix(got.stdout, answerLine) || !strings.Contains(got.stdout, `"permissionDecision":"defer"`) || got.stderr != "" {
			t.Fatalf("a pending approval: %+v, want a defer", got)
		}
	}
	recs := r.waitRecords(t, 2)
	if a := recs[1].Approval; a == nil || a.State != "Pending" || a.Outcome != laneDeferred || recs[1].Verdict != "Ask" {
		t.Fatalf("the record of a deferred call: %+v", recs[1])
	}
	var l gatev1.ToolApprovalList
	if err := cl.List(context.Background(), &l); err != nil || len(l.Items) != 1 {
		t.Fatalf("%d ToolApprovals (%v), want 1", len(l.Items), err)
	}
	sp := l.Items[0].Spec
	if sp.Surface != gatev1.SurfaceHook || sp.Rule != "kubectl-needs-human" || sp.SnapshotDigest != snap.Digest || sp.Pod == nil || sp.Pod.UID != "uid-0" || sp.ToolUseID != "toolu_01ABCDEF" {
		t.Fatalf("the approval: %+v", sp)
	}

	answerApproval(t, cl, l.Items[0].Name, gatev1.ApprovalApproved, "alice", "ship it")
	if got := ask(apply); got.exit != 0 || !strings.Contains(got.stdout, `"permissionDecision":"allow"`) || !strings.Contains(got.stdout, "approved by alice") {
		t.Fatalf("an approved call: %+v, want an allow", got)
	}
	recs = r.waitRecords(t, 3)
	if i := slices.IndexFunc(recs, func(r decisionlog.Record) bool { return r.Approval != nil && r.Approval.Outcome == laneAllowed }); i < 0 ||
		recs[i].Verdict != "Allow" || recs[i].Rule != "kubectl-needs-human" || recs[i].Approval.User != "alice" {
		t.Fatalf("no record of the approved call: %+v", recs)
	}
	if n := r.counter(t, "gate_agent_human_lane_total", map[string]string{"outcome": laneAllowed}); n != 1 {
		t.Errorf("gate_agent_human_lane_total{outcome=Allowed} = %v", n)
	}
	// Calls the rules do not send to a human never reach the confirmer.
	if got := ask(gateagenttest.Payload("Bash", map[string]any{"command": "ls"})); got.exit != 0 || got.stdout != answerLine {
		t.Fatalf("an allowed call: %+v", got)
	}

	// Another call is another approval: deferred, then denied.
	deleteNS := gateagenttest.Payload("Bash", map[string]any{"command": "kubectl delete ns prod"})
	if got := ask(deleteNS); !strings.Contains(got.stdout, `"permissionDecision":"defer"`) {
		t.Fatalf("another held call: %+v, want a defer", got)
	}
	// A record is written after its answer, so two calls' records may come in either order.
	recs = r.waitRecords(t, 5)
	other := slices.IndexFunc(recs, func(r decisionlog.Record) bool { return r.Approval != nil && r.Approval.Name != l.Items[0].Name })
	if other < 0 || recs[other].Approval.Outcome != laneDeferred {
		t.Fatalf("no record of another held call: %+v", recs)
	}
	answerApproval(t, cl, recs[other].Approval.Name, gatev1.ApprovalDenied, "bob", "not on a Friday")
	if got := ask(deleteNS); got.exit != 2 || !strings.Contains(got.stdout, `"permissionDecision":"deny"`) || !strings.Contains(got.stderr, "denied by bob: not on a Friday") {
		t.Fatalf("a denied call: %+v, want a deny with the approver's message", got)
	}
	recs = r.waitRecords(t, 6)
	if i := slices.IndexFunc(recs, func(r decisionlog.Record) bool { return r.Code == CodeApprovalDenied }); i < 0 || recs[i].Verdict != "Block" || recs[i].Approval == nil || recs[i].Approval.State != "Denied" {
		t.Fatalf("no record of the denied call: %+v", recs)
	}
}

// TestHumanLaneFailsClosed: when the confirmer cannot be asked the Ask stands (Claude Code's
// own prompt holds the call); when it refuses to hold the call (the pod's policy is not its own)
// the call is denied; other runtimes, which cannot hold a call, keep their Ask.
func TestHumanLaneFailsClosed(t *testing.T) {
	kubectl := gate.Rule{Name: "kubectl-needs-human", Tools: []string{"bash"}, Action: gate.Ask, Reason: "kubectl changes the cluster"}
	snap, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1}, []gate.Rule{kubectl})
	if err != nil {
		t.Fatal(err)
	}
	vol := gateagenttest.NewVolume(t, gateagenttest.SnapshotFiles(t, snap, nil, "coding-agent-0"))
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("pod-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	apply := gateagenttest.Payload("Bash", map[string]any{"command": "kubectl apply -f prod.yaml"})
	gone, _ := confirmerFor(t, "coding-agents")
	gone.Close()
	other, _ := confirmerFor(t, "other-policy")
	for _, tc := range []struct {
		name, url, tokenFile, runtime string
		wantExit                      int
		want                          string
	}{
		{"confirmer unreachable", gone.URL, tokenFile, agentproto.RuntimeClaudeCode, 0, `"permissionDecision":"ask"`},
		{"no token", other.URL, filepath.Join(t.TempDir(), "missing"), agentproto.RuntimeClaudeCode, 0, `"permissionDecision":"ask"`},
		{"another policy's confirmer", other.URL, tokenFile, agentproto.RuntimeClaudeCode, 2, "the confirmer refused it: this confirmer holds the approvals of agents/other-policy"},
		// Codex's hook has no way to ask: its Ask is the deny it always was.
		{"codex", other.URL, tokenFile, "codex", 2, "Codex's hook cannot ask one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, Options{BundleDir: vol.Dir, HumanLane: &HumanLane{URL: tc.url, TokenFile: tc.tokenFile}})
			input := apply
			if tc.runtime == "codex" {
				input = []byte(`{"session_id":"s","turn_id":"t","transcript_path":null,"cwd":"/workspace","hook_event_name":"PreToolUse","model":"m","permission_mode":"default","tool_name":"Bash","tool_input":{"command":"kubectl apply"},"tool_use_id":"c1"}`)
			}
			got := answerOf(r.ask(t, agentproto.Request{Version: vol.Version(), Runtime: tc.runtime, Input: input}))
			if got.exit != tc.wantExit || !strings.Contains(got.stdout+got.stderr, tc.want) {
				t.Fatalf("%+v, want exit %d with %q", got, tc.wantExit, tc.want)
			}
		})
	}
}
