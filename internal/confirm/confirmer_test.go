package confirm

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

func newConfirmer(t testing.TB, fake *anthropictest.Server) *Confirmer {
	t.Helper()
	return &Confirmer{Client: fake.Client(t), Gate: gatetest.CodingAgents(t), Deadline: 15 * time.Minute, Log: logr.Discard()}
}

func newFake(t testing.TB) *anthropictest.Server { return anthropictest.Start(t) }

// confirmations maps tool_use_id to "result[:deny_message]" and fails on a second one.
func confirmations(t *testing.T, f *anthropictest.Server, session string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range f.Confirmations(session) {
		id := c["tool_use_id"].(string)
		if _, dup := out[id]; dup {
			t.Fatalf("tool use %s was confirmed twice", id)
		}
		v := c["result"].(string)
		if dm, ok := c["deny_message"].(string); ok {
			v += ":" + dm
		}
		out[id] = v
	}
	return out
}

func TestAnswerSession(t *testing.T) {
	f := newFake(t)
	ids := f.AddSession("sesn_1", "agent_1",
		anthropictest.ToolUse{Name: "read", Input: map[string]any{"file_path": "README.md"}, Permission: "ask", Evaluation: map[string]any{"type": "always_ask"}},
		anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "rm -rf /"}, Permission: "ask", Evaluation: map[string]any{"type": "auto", "evaluated_permission": map[string]any{"type": "ask", "reason_code": "indeterminate"}}},
		anthropictest.ToolUse{Type: "agent.mcp_tool_use", MCPServer: "deploy", Name: "run", Input: map[string]any{"env": "prod"}, Permission: "ask"},
		anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "ls"}, Permission: "allow", Evaluation: map[string]any{"type": "always_allow"}},
		anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "ls"}},
		anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "curl x"}, Permission: "deny", Evaluation: map[string]any{"type": "auto", "evaluated_permission": map[string]any{"type": "deny", "reason_code": "high_risk"}}},
		anthropictest.ToolUse{Name: "grep", Input: map[string]any{"pattern": "x"}, Permission: "escalate", Evaluation: map[string]any{"type": "something_new"}},
		anthropictest.ToolUse{Type: "agent.custom_tool_use", Name: "deployService", Input: map[string]any{}},
		anthropictest.ToolUse{Name: "glob", Input: map[string]any{"pattern": "*"}, Permission: "ask", Thread: "sthr_sub"},
	)
	c := newConfirmer(t, f)
	out, err := c.AnswerSession(context.Background(), "sesn_1")
	if err != nil {
		t.Fatal(err)
	}
	got := confirmations(t, f, "sesn_1")
	want := map[string]string{
		ids[0]: "allow",
		ids[1]: "deny:[Intutic Governance] BLOCKED: destructive command on the root filesystem",
		ids[6]: "allow",
		ids[8]: "allow",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("confirmations %v\nwant %v", got, want)
	}
	if out.Confirmed != 4 || out.Held != 1 || out.NextDeadline.IsZero() {
		t.Fatalf("outcome %+v", out)
	}
	// The MCP deploy call waits for a human; the custom tool call is never confirmed.
	if p := f.Pending("sesn_1"); fmt.Sprint(p) != fmt.Sprint([]string{ids[2], ids[7]}) {
		t.Fatalf("pending %v", p)
	}
	for _, r := range f.Requests() {
		if r.Method == "POST" && strings.Contains(r.Body, "session_thread_id") {
			t.Fatalf("a confirmation echoed session_thread_id: %s", r.Body)
		}
	}
	// The subagent's confirmation was routed to its thread by the server.
	for _, e := range f.Confirmations("sesn_1") {
		if e["tool_use_id"] == ids[8] && e["session_thread_id"] != "sthr_sub" {
			t.Fatalf("the fake did not route the subagent's confirmation: %v", e)
		}
	}
	// The partial answer left an idle event listing only what remains.
	evs := f.Events("sesn_1")
	last := evs[len(evs)-1]
	if last["type"] != "session.status_idle" || fmt.Sprint(last["stop_reason"].(map[string]any)["event_ids"]) != fmt.Sprint([]any{ids[2], ids[7]}) {
		t.Fatalf("last event %v", last)
	}

	// A second pass and a restarted confirmer confirm nothing more.
	if out, _ := c.AnswerSession(context.Background(), "sesn_1"); out.Confirmed != 0 {
		t.Fatalf("second pass confirmed %d", out.Confirmed)
	}
	if out, _ := newConfirmer(t, f).AnswerSession(context.Background(), "sesn_1"); out.Confirmed != 0 {
		t.Fatalf("a restarted confirmer confirmed %d", out.Confirmed)
	}
	confirmations(t, f, "sesn_1")
}

func TestAskDeadline(t *testing.T) {
	f := newFake(t)
	ids := f.AddSession("sesn_d", "agent_1", anthropictest.ToolUse{Type: "agent.mcp_tool_use", MCPServer: "deploy", Name: "run", Permission: "ask"})
	c := newConfirmer(t, f)
	now := time.Now()
	clk := testingclock.NewFakePassiveClock(now)
	c.Clock = clk
	out, err := c.AnswerSession(context.Background(), "sesn_d")
	if err != nil || out.Held != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	if d := out.NextDeadline.Sub(now); d > 15*time.Minute || d < 14*time.Minute {
		t.Fatalf("deadline in %s, want about 15m from the call", d)
	}
	clk.SetTime(out.NextDeadline.Add(time.Second))
	if out, err = c.AnswerSession(context.Background(), "sesn_d"); err != nil || out.Confirmed != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	got := confirmations(t, f, "sesn_d")[ids[0]]
	if !strings.HasPrefix(got, "deny:[Intutic Governance] BLOCKED: no human approved this call within 15m0s") {
		t.Fatalf("confirmation %q", got)
	}
}

func TestHumanAnsweredFirstIsDone(t *testing.T) {
	f := newFake(t)
	ids := f.AddSession("sesn_h", "agent_1", anthropictest.ToolUse{Name: "read", Permission: "ask"})
	c := newConfirmer(t, f)
	// Between our list and our send, another replica answers: the fake then rejects ours.
	other := newConfirmer(t, f)
	if _, err := other.AnswerSession(context.Background(), "sesn_h"); err != nil {
		t.Fatal(err)
	}
	// c listed before that, so it still holds the call as pending and sends its answer.
	e := anthropic.Event{ID: ids[0], Type: anthropic.TypeToolUse, Name: "read", EvaluatedPermission: "ask"}
	conf, h, err := c.decideCall(context.Background(), "sesn_h", e)
	if err != nil || h != nil {
		t.Fatalf("read is allowed by the policy, got hold %v, error %v", h, err)
	}
	st := c.state("sesn_h")
	confirmed, err := c.confirm(context.Background(), "sesn_h", st, conf, nil, "")
	if err != nil || !confirmed || !st.answered[ids[0]] {
		t.Fatalf("an already-answered call must count as done, got %v %v", confirmed, err)
	}
	confirmations(t, f, "sesn_h")
}

func TestFaultsAreRetried(t *testing.T) {
	f := newFake(t)
	f.AddSession("sesn_f", "agent_1", anthropictest.ToolUse{Name: "read", Permission: "ask"})
	f.Inject(anthropictest.Fault{Method: "GET", PathSuffix: "/events", Status: 503})
	f.Inject(anthropictest.Fault{Method: "POST", PathSuffix: "/events", Status: 429, RetryAfter: "0.01"})
	f.Inject(anthropictest.Fault{Method: "POST", PathSuffix: "/events", Delay: 50 * time.Millisecond})
	c := newConfirmer(t, f)
	out, err := c.AnswerSession(context.Background(), "sesn_f")
	if err != nil || out.Confirmed != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	confirmations(t, f, "sesn_f")
}

func TestConcurrentTriggersConfirmOnce(t *testing.T) {
	f := newFake(t)
	var calls []anthropictest.ToolUse
	for i := range 5 {
		calls = append(calls, anthropictest.ToolUse{Name: "read", Input: map[string]any{"file_path": fmt.Sprint(i)}, Permission: "ask"})
	}
	f.AddSession("sesn_c", "agent_1", calls...)
	c := newConfirmer(t, f)
	replica := newConfirmer(t, f) // a second replica answering from a webhook
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := c
			if i%2 == 1 {
				who = replica
			}
			if _, err := who.AnswerSession(context.Background(), "sesn_c"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := confirmations(t, f, "sesn_c"); len(got) != 5 {
		t.Fatalf("confirmations %v", got)
	}
}
