package confirm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/approvals"
)

func testScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := gatev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeApprovals is the human lane on controller-runtime's fake client (no cache lag: the
// reader is the client), with funcs intercepting its calls.
func fakeApprovals(t testing.TB, funcs interceptor.Funcs) (*approvals.Store, client.Client) {
	t.Helper()
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithStatusSubresource(&gatev1.ToolApproval{}).WithInterceptorFuncs(funcs).Build()
	return &approvals.Store{Client: cl, Reader: cl, Namespace: "agents", Confirmer: "agents", ConfirmerUID: "uid-1", Policy: "coding-agents",
		Deadline: 15 * time.Minute, Log: logr.Discard()}, cl
}

func deploy() anthropictest.ToolUse {
	return anthropictest.ToolUse{Type: "agent.mcp_tool_use", MCPServer: "deploy", Name: "run", Input: map[string]any{"env": "prod"}, Permission: "ask"}
}

// answerApproval writes a human's answer as kubectl gate approve/deny does, with the decider
// the mutating webhook would record (the webhook itself is tested in internal/webhook).
func answerApproval(ctx context.Context, t testing.TB, cl client.Client, name string, state gatev1.ToolApprovalState, user, message string, at time.Time) {
	t.Helper()
	ta := &gatev1.ToolApproval{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "agents", Name: name}, ta); err != nil {
		t.Fatal(err)
	}
	ta.Status.State = state
	if user != "" {
		ta.Status.Decision = &gatev1.ToolApprovalDecision{User: user, Groups: []string{"approvers"}, Time: &metav1.Time{Time: at}, Message: message}
	}
	meta.SetStatusCondition(&ta.Status.Conditions, metav1.Condition{Type: string(state), Status: metav1.ConditionTrue, Reason: "ByUser", Message: message})
	if err := cl.Status().Update(ctx, ta); err != nil {
		t.Fatal(err)
	}
}

func getApproval(ctx context.Context, t testing.TB, cl client.Client, name string) *gatev1.ToolApproval {
	t.Helper()
	ta := &gatev1.ToolApproval{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "agents", Name: name}, ta); err != nil {
		t.Fatal(err)
	}
	return ta
}

// TestApprovalAnswersTheCall: each held call gets a ToolApproval (spec as the type says, no
// preview unless opted in); an approval answers its call with allow, a denial with deny and
// the approver's message, and only those: an Approved without the approver recorded, one
// recorded after the deadline, and an object of the call's name that describes another call
// (another policy) are never taken as approvals, and those calls are denied at their deadline.
func TestApprovalAnswersTheCall(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	f.AcceptDuplicateConfirmations(true)
	ids := f.AddSession("sesn_a", "agent_1", deploy(), deploy(), deploy(), deploy(), deploy())
	a, cl := fakeApprovals(t, interceptor.Funcs{})
	c := newConfirmer(t, f)
	c.Approvals = a
	now := time.Now()
	clk := testingclock.NewFakePassiveClock(now)
	c.Clock, a.Clock = clk, clk

	// An object squatting the last call's name, for another policy, already "Approved".
	squat := a.Object(approvals.Request{Surface: gatev1.SurfaceManagedAgents, Session: "sesn_a", ToolUseID: ids[4], Tool: "mcp__deploy__run", RawInput: []byte(`{"env":"prod"}`), ExpiresAt: now.Add(time.Hour)})
	squat.Spec.Policy = "lenient"
	if err := cl.Create(ctx, squat); err != nil {
		t.Fatal(err)
	}
	answerApproval(ctx, t, cl, squat.Name, gatev1.ApprovalApproved, "mallory", "", now)

	out, err := c.AnswerSession(ctx, "sesn_a")
	if err != nil || out.Confirmed != 0 || out.Held != 5 {
		t.Fatalf("%+v %v", out, err)
	}
	name := func(i int) string {
		return a.Name(gatev1.SurfaceManagedAgents, "sesn_a", ids[i], "mcp__deploy__run", []byte(`{"env":"prod"}`))
	}
	ta := getApproval(ctx, t, cl, name(0))
	sp := ta.Spec
	if sp.Surface != gatev1.SurfaceManagedAgents || sp.Policy != "coding-agents" || sp.SessionID != "sesn_a" || sp.AgentID != "" || sp.ToolUseID != ids[0] ||
		sp.Tool != "mcp__deploy__run" || sp.Rule != "deploys-need-human" || sp.Reason != "deploys need a human" || sp.Input.Size != int64(len(`{"env":"prod"}`)) ||
		len(sp.Input.SHA256) != 64 || sp.Input.Preview != "" || ta.Labels[gatev1.LabelPolicy] != "coding-agents" || ta.Labels[gatev1.LabelConfirmer] != "agents" ||
		len(ta.OwnerReferences) != 1 || ta.OwnerReferences[0].UID != "uid-1" || ta.OwnerReferences[0].Kind != "SessionConfirmer" {
		t.Fatalf("approval %+v", ta)
	}
	if d := sp.ExpiresAt.Sub(now); d < 14*time.Minute || d > 15*time.Minute {
		t.Fatalf("expiresAt in %s, want the deadline from the call", d)
	}

	answerApproval(ctx, t, cl, name(0), gatev1.ApprovalApproved, "alice", "", now)
	answerApproval(ctx, t, cl, name(1), gatev1.ApprovalDenied, "bob", "not on a Friday", now)
	answerApproval(ctx, t, cl, name(2), gatev1.ApprovalApproved, "", "", now)                     // no approver recorded
	answerApproval(ctx, t, cl, name(3), gatev1.ApprovalApproved, "carol", "", now.Add(time.Hour)) // recorded after the deadline
	if out, err = c.AnswerSession(ctx, "sesn_a"); err != nil || out.Confirmed != 2 || out.Held != 3 {
		t.Fatalf("%+v %v", out, err)
	}
	got := confirmations(t, f, "sesn_a")
	if got[ids[0]] != "allow" || got[ids[1]] != "deny:[Intutic Governance] BLOCKED: a human denied this call: not on a Friday" || len(got) != 2 {
		t.Fatalf("confirmations %v", got)
	}

	now = now.Add(16 * time.Minute)
	clk.SetTime(now)
	if out, err = c.AnswerSession(ctx, "sesn_a"); err != nil || out.Confirmed != 3 || out.Held != 0 {
		t.Fatalf("%+v %v", out, err)
	}
	got = confirmations(t, f, "sesn_a")
	for _, i := range []int{2, 3, 4} {
		if !strings.HasPrefix(got[ids[i]], "deny:[Intutic Governance] BLOCKED: no human approved this call within 15m0s (deploys need a human)") {
			t.Errorf("call %d: %q, want the deadline's denial", i, got[ids[i]])
		}
	}
	// A restarted confirmer sends nothing more.
	c2 := newConfirmer(t, f)
	c2.Approvals, c2.Clock = a, c.Clock
	if out, err := c2.AnswerSession(ctx, "sesn_a"); err != nil || out.Confirmed != 0 {
		t.Fatalf("restart: %+v %v", out, err)
	}
	confirmations(t, f, "sesn_a")
}

// TestApprovalFaultsDeny: with the API server refusing every write, a held call is never
// allowed: it waits, and its deadline denies it all the same.
func TestApprovalFaultsDeny(t *testing.T) {
	ctx := context.Background()
	down := errors.New("the API server is down")
	creates := 0
	a, _ := fakeApprovals(t, interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			creates++
			return down
		},
		SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
			return down
		},
	})
	f := newFake(t)
	ids := f.AddSession("sesn_f", "agent_1", deploy())
	c := newConfirmer(t, f)
	c.Approvals = a
	now := time.Now()
	clk := testingclock.NewFakePassiveClock(now)
	c.Clock = clk
	for range 3 {
		if out, err := c.AnswerSession(ctx, "sesn_f"); err != nil || out.Held != 1 || out.Confirmed != 0 {
			t.Fatalf("%+v %v", out, err)
		}
	}
	if creates != 3 {
		t.Fatalf("the creation was tried %d times, want once per pass", creates)
	}
	now = now.Add(15 * time.Minute)
	clk.SetTime(now)
	if out, err := c.AnswerSession(ctx, "sesn_f"); err != nil || out.Confirmed != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	if got := confirmations(t, f, "sesn_f")[ids[0]]; !strings.HasPrefix(got, "deny:[Intutic Governance] BLOCKED: no human approved") {
		t.Fatalf("confirmation %q", got)
	}
}

// TestExpireLosesToAnEarlierAnswer: an approval admitted just before the deadline, which the
// confirmer's cache had not seen, wins over Expired (the write conflicts and the fresh object
// is acted on); Expired is written on a call nobody answered.
func TestExpireLosesToAnEarlierAnswer(t *testing.T) {
	ctx := context.Background()
	a, cl := fakeApprovals(t, interceptor.Funcs{})
	stale := fakeReader{Client: cl, stale: map[string]*gatev1.ToolApproval{}}
	a.Reader = stale
	f := newFake(t)
	ids := f.AddSession("sesn_e", "agent_1", deploy(), deploy())
	c := newConfirmer(t, f)
	c.Approvals = a
	now := time.Now()
	clk := testingclock.NewFakePassiveClock(now)
	c.Clock, a.Clock = clk, clk
	if _, err := c.AnswerSession(ctx, "sesn_e"); err != nil {
		t.Fatal(err)
	}
	n0 := a.Name(gatev1.SurfaceManagedAgents, "sesn_e", ids[0], "mcp__deploy__run", []byte(`{"env":"prod"}`))
	n1 := a.Name(gatev1.SurfaceManagedAgents, "sesn_e", ids[1], "mcp__deploy__run", []byte(`{"env":"prod"}`))
	stale.stale[n0] = getApproval(ctx, t, cl, n0) // the cache still has it Pending
	answerApproval(ctx, t, cl, n0, gatev1.ApprovalApproved, "alice", "", now.Add(14*time.Minute))
	now = now.Add(15 * time.Minute)
	clk.SetTime(now)
	if _, err := c.AnswerSession(ctx, "sesn_e"); err != nil {
		t.Fatal(err)
	}
	got := confirmations(t, f, "sesn_e")
	if got[ids[0]] != "allow" || !strings.HasPrefix(got[ids[1]], "deny:") {
		t.Fatalf("confirmations %v", got)
	}
	if ta := getApproval(ctx, t, cl, n0); ta.Status.State != gatev1.ApprovalApproved {
		t.Fatalf("the approval became %s", ta.Status.State)
	}
	ta := getApproval(ctx, t, cl, n1)
	cond := meta.FindStatusCondition(ta.Status.Conditions, gatev1.ConditionExpired)
	if ta.Status.State != gatev1.ApprovalExpired || cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != gatev1.ReasonNoAnswer {
		t.Fatalf("status %+v", ta.Status)
	}
}

// fakeReader answers Gets of the names in stale with those objects: a cache lagging behind.
type fakeReader struct {
	client.Client
	stale map[string]*gatev1.ToolApproval
}

func (r fakeReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if s, ok := r.stale[key.Name]; ok {
		s.DeepCopyInto(obj.(*gatev1.ToolApproval))
		return nil
	}
	return r.Client.Get(ctx, key, obj, opts...)
}

// TestConsoleFirstAndLateExpired: a call the runtime's console answered while no confirmer ran
// is recorded AnsweredInRuntime by the restarted confirmer's first pass, which sends nothing
// for it; a call denied at its deadline while the Expired write failed is recorded Expired by
// the next pass.
func TestConsoleFirstAndLateExpired(t *testing.T) {
	ctx := context.Background()
	failWrites := false
	a, cl := fakeApprovals(t, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if failWrites {
				return errors.New("the API server is down")
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	f := newFake(t)
	ids := f.AddSession("sesn_c", "agent_1", deploy(), deploy())
	now := time.Now()
	clk := testingclock.NewFakePassiveClock(now)
	a.Clock = clk
	first := newConfirmer(t, f)
	first.Approvals, first.Clock = a, clk
	if out, err := first.AnswerSession(ctx, "sesn_c"); err != nil || out.Held != 2 {
		t.Fatalf("%+v %v", out, err)
	}
	if err := f.Client(t).SendEvents(ctx, "sesn_c", anthropic.Confirm(ids[0], false, "not from the console")); err != nil {
		t.Fatal(err)
	}

	restarted := newConfirmer(t, f)
	restarted.Approvals, restarted.Clock = a, clk
	if out, err := restarted.AnswerSession(ctx, "sesn_c"); err != nil || out.Confirmed != 0 || out.Held != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	n0 := a.Name(gatev1.SurfaceManagedAgents, "sesn_c", ids[0], "mcp__deploy__run", []byte(`{"env":"prod"}`))
	ta := getApproval(ctx, t, cl, n0)
	cond := meta.FindStatusCondition(ta.Status.Conditions, gatev1.ConditionAnsweredInRuntime)
	if ta.Status.State != gatev1.ApprovalAnsweredInRuntime || cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != "RuntimeDeny" {
		t.Fatalf("status %+v", ta.Status)
	}

	failWrites = true
	now = now.Add(16 * time.Minute)
	clk.SetTime(now)
	if out, err := restarted.AnswerSession(ctx, "sesn_c"); err != nil || out.Confirmed != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	n1 := a.Name(gatev1.SurfaceManagedAgents, "sesn_c", ids[1], "mcp__deploy__run", []byte(`{"env":"prod"}`))
	if s := getApproval(ctx, t, cl, n1).Status.State; s != "" {
		t.Fatalf("the failed write left state %q", s)
	}
	failWrites = false
	if out, err := restarted.AnswerSession(ctx, "sesn_c"); err != nil || out.Confirmed != 0 {
		t.Fatalf("%+v %v", out, err)
	}
	if s := getApproval(ctx, t, cl, n1).Status.State; s != gatev1.ApprovalExpired {
		t.Fatalf("state %q, want Expired", s)
	}
	got := confirmations(t, f, "sesn_c") // fails on a second confirmation of either call
	if got[ids[0]] != "deny:not from the console" || !strings.HasPrefix(got[ids[1]], "deny:[Intutic Governance] BLOCKED: no human approved") {
		t.Fatalf("confirmations %v", got)
	}
}
