package confirm

import (
	"context"
	"fmt"
	"sync"

	"github.com/intutic/gate-operator/internal/gate"
)

// callerOf is who makes a session's calls, for the rules' `caller`: the agent the session runs,
// as the Sessions API reports it (the session object's agent.id). It is looked up only when a
// rule of the policy in force reads `caller`, and once per session: a session's agent does not
// change. A session object that names no agent leaves it "" (unknown, not an error). A lookup
// that fails is an error, so the answering pass fails and is retried like a failed listing: a
// call is never decided without an identity the confirmer could have read. (A snapshot that
// starts reading caller between the check and the decision sees the agent of that one call as
// unknown, the case every identity rule must already allow for.)
func (c *Confirmer) callerOf(ctx context.Context, sessionID string) (gate.Caller, error) {
	if !c.Gate.ReadsCaller() {
		return gate.Caller{}, nil
	}
	if agent, ok := c.agents.get(sessionID); ok {
		return gate.Caller{Agent: agent}, nil
	}
	s, err := c.Client.GetSession(ctx, sessionID)
	if err != nil {
		c.countAPIError(err)
		return gate.Caller{}, fmt.Errorf("looking up the agent of session %s: %w", sessionID, err)
	}
	agent := ""
	if s.Agent != nil {
		agent = s.Agent.ID
	}
	c.agents.put(sessionID, agent)
	return gate.Caller{Agent: agent}, nil
}

// maxCachedAgents bounds the sessions whose agent is remembered; past it the cache starts over,
// and sessions still running are looked up again.
const maxCachedAgents = 10_000

// agentCache remembers the agent of each session looked up. The zero value is ready.
type agentCache struct {
	mu sync.Mutex
	m  map[string]string
}

func (a *agentCache) get(session string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	agent, ok := a.m[session]
	return agent, ok
}

func (a *agentCache) put(session, agent string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil || len(a.m) >= maxCachedAgents {
		a.m = map[string]string{}
	}
	a.m[session] = agent
}
