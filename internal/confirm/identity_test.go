package confirm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

// agentRules let only agent_trusted run commands, in its own session, and hold the calls of a
// session whose agent the API does not name.
func agentRules(t *testing.T) *gate.Gate {
	return gatetest.Gate(t,
		gate.Rule{Name: "unnamed-agent", Tools: []string{"bash"}, When: `caller.agent == ""`, Action: gate.Ask, Reason: "an agent the gate cannot name"},
		gate.Rule{Name: "trusted-agent-only", Tools: []string{"bash"}, Action: gate.Block, Reason: "only agent_trusted runs commands",
			When: `caller.agent != "" && !(caller.agent == "agent_trusted" && caller.session == "sesn_t" && caller.namespace == "agents" && caller.policy == "coding-agents" && caller.serviceAccount == "" && caller.pod == "")`},
	)
}

// sessionLookups counts the GETs of one session object.
func sessionLookups(f *anthropictest.Server, session string) int {
	n := 0
	for _, r := range f.Requests() {
		if r.Method == "GET" && strings.HasSuffix(r.Path, "/v1/sessions/"+session) {
			n++
		}
	}
	return n
}

// TestCallerAgent: the rules see the agent of the session, as the Sessions API names it, looked
// up once per session.
func TestCallerAgent(t *testing.T) {
	f := newFake(t)
	ls := anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "ls"}, Permission: "ask"}
	trusted := f.AddSession("sesn_t", "agent_trusted", ls)
	other := f.AddSession("sesn_o", "agent_other", ls)
	unnamed := f.AddSession("sesn_n", "", ls)
	c := &Confirmer{Client: f.Client(t), Gate: agentRules(t), Deadline: time.Hour, Log: logr.Discard()}
	ctx := context.Background()
	for _, s := range []string{"sesn_t", "sesn_o", "sesn_n"} {
		if _, err := c.AnswerSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if got := confirmations(t, f, "sesn_t"); got[trusted[0]] != "allow" {
		t.Errorf("agent_trusted: %v", got)
	}
	if got := confirmations(t, f, "sesn_o"); got[other[0]] != "deny:[Intutic Governance] BLOCKED: only agent_trusted runs commands" {
		t.Errorf("agent_other: %v", got)
	}
	// No agent in the session object: unknown, so the call waits for a human.
	if got := confirmations(t, f, "sesn_n"); len(got) != 0 || len(f.Pending("sesn_n")) != 1 || f.Pending("sesn_n")[0] != unnamed[0] {
		t.Errorf("a session with no agent: confirmations %v, pending %v", got, f.Pending("sesn_n"))
	}

	// More calls and more passes: the agent is not asked for again.
	more := f.AddCalls("sesn_t", ls, ls)
	if _, err := c.AnswerSession(ctx, "sesn_t"); err != nil {
		t.Fatal(err)
	}
	if got := confirmations(t, f, "sesn_t"); got[more[0]] != "allow" || got[more[1]] != "allow" {
		t.Errorf("later calls of agent_trusted: %v", got)
	}
	if n := sessionLookups(f, "sesn_t"); n != 1 {
		t.Errorf("the session was looked up %d times, want once", n)
	}
}

// TestCallerAgentNotLookedUpUnlessRead: a policy whose rules never read caller costs no lookup.
func TestCallerAgentNotLookedUpUnlessRead(t *testing.T) {
	f := newFake(t)
	f.AddSession("sesn_1", "agent_1", anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "rm -rf /"}, Permission: "ask"})
	c := newConfirmer(t, f) // gatetest.CodingAgents: no rule reads caller
	if _, err := c.AnswerSession(context.Background(), "sesn_1"); err != nil {
		t.Fatal(err)
	}
	if len(confirmations(t, f, "sesn_1")) != 1 {
		t.Fatal("the call was not answered")
	}
	if n := sessionLookups(f, "sesn_1"); n != 0 {
		t.Fatalf("the session was looked up %d times", n)
	}
}

// TestCallerAgentLookupFails: a call is not decided while its agent cannot be read: the pass
// fails, as a failed listing does, and the next pass answers it.
func TestCallerAgentLookupFails(t *testing.T) {
	f := newFake(t)
	ids := f.AddSession("sesn_t", "agent_trusted", anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "ls"}, Permission: "ask"})
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	c := &Confirmer{Client: f.Client(t), Gate: agentRules(t), Deadline: time.Hour, Log: logr.Discard(), Metrics: m}
	f.Inject(anthropictest.Fault{Method: "GET", PathSuffix: "/v1/sessions/sesn_t", Status: 403})
	if _, err := c.AnswerSession(context.Background(), "sesn_t"); err == nil || !strings.Contains(err.Error(), "looking up the agent of session sesn_t") {
		t.Fatalf("want the lookup's error, got %v", err)
	}
	if got := confirmations(t, f, "sesn_t"); len(got) != 0 {
		t.Fatalf("a call was answered without its agent: %v", got)
	}
	if n := counter(t, reg, `confirmer_api_errors_total{status="403"}`); n != 1 {
		t.Errorf("API errors counted: %v, want 1", n)
	}
	if _, err := c.AnswerSession(context.Background(), "sesn_t"); err != nil {
		t.Fatal(err)
	}
	if got := confirmations(t, f, "sesn_t"); got[ids[0]] != "allow" {
		t.Fatalf("after the lookup works: %v", got)
	}
}
