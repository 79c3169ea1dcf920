package controllers

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic"
)

// checkAgentTools is the Report's rule for the Managed Agents tools a SessionConfirmer's
// agents run under always_allow: the API runs those calls without asking, so the confirmer
// never sees them.
const checkAgentTools = "agent-tools-confirmed"

// Agent lookups: each answer is kept agentAnswerTTL (a failure agentErrorTTL), so the
// Report's frequent reconciles do not call the API each time; one reconcile waits at most
// agentLookupTimeout for all its lookups, agentLookupWorkers at a time.
const (
	agentAnswerTTL     = 5 * time.Minute
	agentErrorTTL      = time.Minute
	agentLookupTimeout = 20 * time.Second
	agentLookupWorkers = 8
	// maxNamed bounds the tools or agents one result's message names.
	maxNamed = 20
)

// highRiskTools are the built-in tools Anthropic's secure-deployment guide would run under auto
// or always_ask.
var highRiskTools = []string{"bash", "write", "edit", "web_fetch"}

// agentKey is one agent of one generation of a SessionConfirmer: a spec change (its base URL,
// key Secret, workspace or agents) looks again.
type agentKey struct {
	confirmer  types.UID
	generation int64
	agent      string
}

// agentAnswer is a lookup's outcome: the agent, or why it could not be read (never the key).
type agentAnswer struct {
	agent   *anthropic.Agent
	err     string
	expires time.Time
}

// agentCache holds the answers of the lookups until they expire.
type agentCache struct {
	mu      sync.Mutex
	answers map[agentKey]agentAnswer
}

func (c *agentCache) get(k agentKey, now time.Time) (agentAnswer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.answers[k]
	return a, ok && now.Before(a.expires)
}

// put stores an answer and forgets the expired ones (deleted SessionConfirmers' among them).
func (c *agentCache) put(k agentKey, a agentAnswer, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answers == nil {
		c.answers = map[agentKey]agentAnswer{}
	}
	for old, v := range c.answers {
		if !now.Before(v.expires) {
			delete(c.answers, old)
		}
	}
	c.answers[k] = a
}

// agentResults are the results of the SessionConfirmers' agents: for each SessionConfirmer a
// warning per agent that runs tools under always_allow, an error per agent that could not be
// read, and a pass when every agent was read and none does. It returns when the earliest of
// the answers it used expires (0: none used). A SessionConfirmer without agentIDs has none.
func (r *ReportReconciler) agentResults(ctx context.Context, in *observed) ([]reportsv1alpha1.ReportResult, time.Duration) {
	if r.APIReader == nil {
		return nil, 0
	}
	answers := r.lookUpAgents(ctx, in.confirmers, in.now)
	var out []reportsv1alpha1.ReportResult
	var requeue time.Duration
	for i := range in.confirmers {
		sc := &in.confirmers[i]
		ref := objectRef("SessionConfirmer", sc.Namespace, sc.Name, sc.UID)
		policy := "HarnessAgentPolicy/" + sc.PolicyDisplayName()
		clean := 0
		for _, id := range sc.Spec.Sessions.AgentIDs {
			a := answers[agentKey{sc.UID, sc.Generation, id}]
			if left := a.expires.Sub(in.now); requeue == 0 || left < requeue {
				requeue = left
			}
			if a.agent == nil {
				out = append(out, result(policy, checkAgentTools, "error", "", fmt.Sprintf(
					"agent %s of SessionConfirmer %s could not be read, so the tools it runs under always_allow are unknown: %s", id, sc.Name, a.err), ref))
				continue
			}
			if res, found := allowedToolsResult(policy, sc.Name, a.agent, ref); found {
				out = append(out, res)
				continue
			}
			clean++
		}
		if clean > 0 && clean == len(sc.Spec.Sessions.AgentIDs) {
			out = append(out, result(policy, checkAgentTools, "pass", "", fmt.Sprintf(
				"no agent of SessionConfirmer %s (%s) runs a tool under always_allow: every call asks or is decided by the API (auto)", sc.Name, nameSome(sc.Spec.Sessions.AgentIDs)), ref))
		}
	}
	return out, requeue
}

// allowedToolsResult is the warning for an agent whose enabled tools include some under
// always_allow: severity high when a high-risk built-in tool is among them, medium for an MCP
// server's tools (what they reach is the server's, unknown here), low for the built-in tools
// that only read (read, glob, grep, web_search). found is false when there are none.
func allowedToolsResult(policy, confirmer string, a *anthropic.Agent, ref corev1.ObjectReference) (reportsv1alpha1.ReportResult, bool) {
	var tools []string
	var severity reportsv1alpha1.ResultSeverity = "low"
	for _, p := range a.ToolPolicies() {
		if !p.Enabled || p.Policy != anthropic.PolicyAlwaysAllow {
			continue
		}
		tools = append(tools, p.Tool)
		switch {
		case !p.MCP && slices.Contains(highRiskTools, p.Tool):
			severity = "high"
		case p.MCP && severity == "low":
			severity = "medium"
		}
	}
	if len(tools) == 0 {
		return reportsv1alpha1.ReportResult{}, false
	}
	return result(policy, checkAgentTools, "warn", severity, fmt.Sprintf(
		"agent %s (%q, version %d) runs %s under always_allow: the API runs these calls without asking, so SessionConfirmer %s never sees them; set their permission_policy to always_ask (the confirmer decides every call) or auto",
		a.ID, a.Name, a.Version, nameSome(tools), confirmer), ref), true
}

// nameSome lists names for a message, at most maxNamed of them.
func nameSome(names []string) string {
	if len(names) > maxNamed {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamed], ", "), len(names)-maxNamed)
	}
	return strings.Join(names, ", ")
}

// lookUpAgents answers for every agent of the SessionConfirmers: from the cache, else read
// with its SessionConfirmer's API key and cached. It never fails: a failure is an answer.
func (r *ReportReconciler) lookUpAgents(ctx context.Context, confirmers []gatev1.SessionConfirmer, now time.Time) map[agentKey]agentAnswer {
	answers := map[agentKey]agentAnswer{}
	var mu sync.Mutex
	answer := func(k agentKey, a agentAnswer) {
		r.agents.put(k, a, now)
		mu.Lock()
		answers[k] = a
		mu.Unlock()
	}
	type lookup struct {
		key    agentKey
		client *anthropic.Client
	}
	var todo []lookup
	for i := range confirmers {
		sc := &confirmers[i]
		var client *anthropic.Client
		var clientErr string
		for _, id := range sc.Spec.Sessions.AgentIDs {
			k := agentKey{sc.UID, sc.Generation, id}
			if a, ok := r.agents.get(k, now); ok {
				answers[k] = a
				continue
			}
			if client == nil && clientErr == "" {
				client, clientErr = r.agentClient(ctx, sc)
			}
			if clientErr != "" {
				answer(k, agentAnswer{err: clientErr, expires: now.Add(agentErrorTTL)})
				continue
			}
			todo = append(todo, lookup{k, client})
		}
	}
	if len(todo) == 0 {
		return answers
	}
	ctx, cancel := context.WithTimeout(ctx, agentLookupTimeout)
	defer cancel()
	slots := make(chan struct{}, agentLookupWorkers)
	var wg sync.WaitGroup
	for _, l := range todo {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			a, err := l.client.GetAgent(ctx, l.key.agent)
			if err != nil {
				answer(l.key, agentAnswer{err: err.Error(), expires: now.Add(agentErrorTTL)})
				return
			}
			answer(l.key, agentAnswer{agent: a, expires: now.Add(agentAnswerTTL)})
		})
	}
	wg.Wait()
	return answers
}

// agentClient is a client of the SessionConfirmer's API with its key, read past the cache; or
// why there is none, which names the Secret and never holds its value.
func (r *ReportReconciler) agentClient(ctx context.Context, sc *gatev1.SessionConfirmer) (*anthropic.Client, string) {
	ref := sc.Spec.Anthropic.APIKeySecretRef
	s := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: ref.Name}, s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("the API key Secret %s does not exist", ref.Name)
	case err != nil:
		return nil, fmt.Sprintf("reading the API key Secret %s: %v", ref.Name, err)
	case len(strings.TrimSpace(string(s.Data[ref.Key]))) == 0:
		return nil, fmt.Sprintf("the API key Secret %s has no key %s", ref.Name, ref.Key)
	}
	c, err := anthropic.NewClient(anthropic.ClientOptions{BaseURL: sc.Spec.Anthropic.BaseURL, APIKey: string(s.Data[ref.Key]),
		WorkspaceID: sc.Spec.Anthropic.WorkspaceID, HTTPClient: r.HTTPClient, UserAgent: "gate-operator-manager"})
	if err != nil {
		return nil, err.Error()
	}
	return c, ""
}

// defaultAgentsHTTPClient sends the agent lookups: the default transport (its proxy from the
// environment), one for every lookup, so connections are reused.
func defaultAgentsHTTPClient() *http.Client {
	return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
}
