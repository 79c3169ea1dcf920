package confirm

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/approvals"
	"github.com/intutic/gate-operator/internal/testutil"
)

// approvalDeadline is the human-approval deadline of the approval replicas: long enough to
// create and answer the approvals (two replicas started, one restarted, a third joining, 24
// approvals written, under -race and beside the other test packages), short enough to watch
// the others expire.
const approvalDeadline = 20 * time.Second

// approvalReplica is a confirmer replica with the human lane: its shard, confirmer, session
// watcher, ToolApproval cache and watch, and Event recorder, running until stopped.
type approvalReplica struct {
	shard     *Shard
	confirmer *Confirmer
	cancel    context.CancelFunc
	done      sync.WaitGroup
}

func startApprovalReplica(t *testing.T, cfg *rest.Config, f *anthropictest.Server, name string, members []string) *approvalReplica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &approvalReplica{shard: NewShard(name), cancel: cancel}
	r.shard.Set(members)
	scheme := testScheme(t)
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	c, err := approvals.NewCache(cfg, scheme, "agents", "agents")
	if err != nil {
		t.Fatal(err)
	}
	informer, err := c.GetInformer(ctx, &gatev1.ToolApproval{})
	if err != nil {
		t.Fatal(err)
	}
	r.done.Go(func() { _ = c.Start(ctx) })
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: kubernetes.NewForConfigOrDie(cfg).EventsV1()})
	b.StartRecordingToSink(ctx.Done())
	a := &approvals.Store{Client: cl, Reader: c, Recorder: b.NewRecorder(scheme, "gate-confirmer"), Namespace: "agents", Confirmer: "agents", ConfirmerUID: "uid-1",
		Policy: "coding-agents", Deadline: approvalDeadline, Log: logr.Discard()}
	r.confirmer = newConfirmer(t, f)
	r.confirmer.Deadline, r.confirmer.Shard, r.confirmer.Approvals = approvalDeadline, r.shard, a
	w := &Watcher{Confirmer: r.confirmer, AgentIDs: []string{"agent_1"}, PollInterval: 300 * time.Millisecond, IdleTimeout: 10 * time.Second}
	aw := &approvals.Watch{Approvals: a, Confirmer: r.confirmer, Shard: r.shard}
	r.done.Go(func() { _ = w.Run(ctx) })
	r.done.Go(func() { _ = aw.Run(ctx, informer) })
	r.done.Go(func() { <-ctx.Done(); b.Shutdown() })
	return r
}

func (r *approvalReplica) stop() {
	r.cancel()
	r.done.Wait()
}

// TestApprovalsReachSessionsOnce runs replicas sharing six sessions against a real API
// server with the ToolApproval CRD. Each session pauses on four calls that go to a human: one
// approved, one denied with a message, one left alone, one answered in the runtime's own
// console first. Meanwhile one replica restarts (fresh state, rebuilt from the API and the
// sessions' histories), a third joins and takes over some sessions with their held calls, and
// the answered approvals are touched again (duplicate watch events).
// The fake records a second confirmation instead of refusing it, so any would show: every call
// gets exactly one confirmation, the right one; each approval ends in the state that says what
// happened (Approved, Denied, Expired with reason NoAnswer, AnsweredInRuntime), with an Event
// for the outcome. An approval of the HTTP surfaces nobody answered turns Expired.
func TestApprovalsReachSessionsOnce(t *testing.T) {
	cfg := apiservertest.Start(t, true)
	ctx := testutil.Context(t, 2*time.Minute)
	cl, err := client.New(cfg, client.Options{Scheme: testScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := newFake(t)
	f.AcceptDuplicateConfirmations(true)
	sessions := sessionIDs(6)
	calls := map[string][]string{}
	for _, id := range sessions {
		calls[id] = f.AddSession(id, "agent_1", deploy(), deploy(), deploy(), deploy())
	}
	ab := []string{"a", "b"}
	a, b := startApprovalReplica(t, cfg, f, "a", ab), startApprovalReplica(t, cfg, f, "b", ab)
	defer func() { b.stop() }()

	name := func(session string, i int) string {
		return approvals.Name("agents", gatev1.SurfaceManagedAgents, session, calls[session][i], "mcp__deploy__run", approvals.InputDigest([]byte(`{"env":"prod"}`)))
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		var l gatev1.ToolApprovalList
		if err := cl.List(ctx, &l, client.InNamespace("agents")); err != nil {
			return err
		}
		if len(l.Items) != 4*len(sessions) {
			return fmt.Errorf("%d ToolApprovals", len(l.Items))
		}
		return nil
	})
	// a restarts: the new process knows nothing but what the API server and the sessions say.
	a.stop()
	a = startApprovalReplica(t, cfg, f, "a", ab)
	defer func() { a.stop() }()
	// c joins: the others let go of its sessions first (in the order the members Lease keeps),
	// then it takes them over, held calls and all.
	abc := []string{"a", "b", "c"}
	a.shard.Set(abc)
	b.shard.Set(abc)
	c := startApprovalReplica(t, cfg, f, "c", abc)
	defer func() { c.stop() }()
	moved := 0
	for _, id := range sessions {
		if c.shard.Owns(id) {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no session moved to c: the test would not cover a takeover")
	}
	// The console answers the fourth call of every session, before anyone here does.
	console := f.Client(t)
	for _, id := range sessions {
		if err := console.SendEvents(ctx, id, anthropic.Confirm(calls[id][3], true, "")); err != nil {
			t.Fatal(err)
		}
	}

	// An approval of the harness surface, which no one answers: it turns Expired.
	http, err := a.confirmer.Approvals.Ensure(ctx, approvals.Request{Surface: gatev1.SurfaceHarness, Session: "run_1", ToolUseID: "ap_1", Tool: "deploy",
		RawInput: []byte(`{}`), ExpiresAt: time.Now().Add(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}

	now := time.Now()
	for _, id := range sessions {
		answerApproval(ctx, t, cl, name(id, 0), gatev1.ApprovalApproved, "alice", "", now)
		answerApproval(ctx, t, cl, name(id, 1), gatev1.ApprovalDenied, "bob", "not on a Friday", now)
	}
	// Duplicate events: the answered approvals change again (a label), after their answer.
	for _, id := range sessions {
		for i := range 2 {
			ta := getApproval(ctx, t, cl, name(id, i))
			ta.Labels["touched"] = "yes"
			if err := cl.Update(ctx, ta); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, id := range sessions {
		testutil.Eventually(t, 40*time.Second, func() error {
			if p := f.Pending(id); len(p) != 0 {
				return fmt.Errorf("%s still waits on %v", id, p)
			}
			return nil
		})
	}
	wantStates := []gatev1.ToolApprovalState{gatev1.ApprovalApproved, gatev1.ApprovalDenied, gatev1.ApprovalExpired, gatev1.ApprovalAnsweredInRuntime}
	wantEvents := []string{approvals.EventAllowed, approvals.EventDenied, approvals.EventExpired, approvals.EventAnsweredInRuntime}
	for _, id := range sessions {
		got := confirmations(t, f, id) // fails on a call confirmed twice
		c := calls[id]
		if got[c[0]] != "allow" || got[c[1]] != "deny:[Intutic Governance] BLOCKED: a human denied this call: not on a Friday" ||
			got[c[2]] != fmt.Sprintf("deny:[Intutic Governance] BLOCKED: no human approved this call within %s (deploys need a human)", approvalDeadline) || got[c[3]] != "allow" {
			t.Errorf("%s: confirmations %v", id, got)
		}
		for i, want := range wantStates {
			testutil.Eventually(t, 10*time.Second, func() error {
				ta := getApproval(ctx, t, cl, name(id, i))
				if ta.Status.State != want {
					return fmt.Errorf("%s call %d: state %q, want %s", id, i, ta.Status.State, want)
				}
				if i >= 2 {
					cond := meta.FindStatusCondition(ta.Status.Conditions, string(want))
					if cond == nil || cond.Status != metav1.ConditionTrue {
						return fmt.Errorf("%s call %d: conditions %+v", id, i, ta.Status.Conditions)
					}
					if i == 2 && cond.Reason != gatev1.ReasonNoAnswer {
						return fmt.Errorf("Expired with reason %s", cond.Reason)
					}
				}
				return nil
			})
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		ta := getApproval(ctx, t, cl, http.Name)
		if ta.Status.State != gatev1.ApprovalExpired {
			return fmt.Errorf("the harness approval is %q", ta.Status.State)
		}
		return nil
	})
	testutil.Eventually(t, 20*time.Second, func() error {
		evs, err := kube.EventsV1().Events("agents").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		has := map[string]bool{}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "ToolApproval" && e.ReportingController == "gate-confirmer" {
				has[e.Regarding.Name+"/"+e.Reason] = true
			}
		}
		for _, id := range sessions {
			for i, reason := range wantEvents {
				if !has[name(id, i)+"/"+reason] {
					return fmt.Errorf("no Event %s on %s (%d events)", reason, name(id, i), len(evs.Items))
				}
			}
		}
		if !has[http.Name+"/"+approvals.EventExpired] {
			return fmt.Errorf("no Event Expired on the harness approval")
		}
		return nil
	})
}
