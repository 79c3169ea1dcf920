package gateagent

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/claudecode"
	"github.com/intutic/gate-operator/internal/runtime/runtimes"
)

// answer decides a request as gate-hook decides the same call with the same flags, in the same
// order (the runtime, the hook input, the bundle, the rules), and answers it with the bytes and
// exit status gate-hook prints (runtimes.Runtime.Answer). It returns the response and the decision's
// record, whose latency the caller sets.
//
// The response's version is the one the bundle was loaded from. A call refused before the
// bundle is consulted (an unknown runtime, a hook input that does not parse) is answered the
// same under every version, so under the request's: the client uses the answer.
func (s *Server) answer(req *agentproto.Request) (agentproto.Response, decisionlog.Record) {
	version := req.Version
	var lp *loadedPolicy
	var call *gate.Call
	// A request for a runtime the sidecar does not know is refused in the default runtime's
	// format: its exit status 2 is a deny for every runtime.
	rt, _ := runtimes.Lookup(runtimes.Default)
	d := func() (d gate.Decision) {
		defer func() {
			if r := recover(); r != nil {
				d = gate.Refuse(gate.CodeGateCrashed, crashed(r))
			}
		}()
		asked, known := runtimes.Lookup(req.Runtime)
		if !known {
			return gate.Refuse(gate.CodeInputInvalid, "gate-agent does not know the runtime "+strconv.Quote(req.Runtime)+", only "+strings.Join(runtimes.Names(), ", "))
		}
		rt = asked
		c, err := rt.Parse(req.Input)
		if err != nil {
			return gate.Refuse(gate.CodeInputInvalid, err.Error())
		}
		call = c
		version, lp = s.policyFor(policyKey{layered: req.Flags.Layers, workspace: req.Workspace})
		if lp.failure != nil {
			return gate.Refuse(lp.failure.Code, lp.failure.Reason)
		}
		call.Caller = lp.caller
		return lp.decider.Decide(call)
	}()

	// An Ask of a Claude Code call goes to a human where the pod's policy opted in: the call is
	// held ("defer") until the approval is answered, and the resumed session is answered from it.
	var hold held
	if d.Verdict == gate.Ask && s.opts.HumanLane != nil && rt.Name == claudecode.Name && lp != nil && lp.failure == nil {
		hold = s.holdForHuman(req.Input, podPolicy(lp, d), d)
		d = hold.d
		s.metrics.humanLane.WithLabelValues(hold.outcome).Inc()
	}
	// A human's approval is an allow spelled out: the call runs without Claude Code's prompt.
	stdout, stderr, exit := rt.Answer(d, req.Token, req.Flags.ExplicitAllow || (hold.approval != nil && d.Verdict == gate.Allow))
	if hold.deferred {
		stdout, stderr, exit = runtimes.DeferClaudeCode(d.Reason, req.Token), nil, 0
	}
	resp := agentproto.Response{Nonce: req.Nonce, Version: version, Exit: exit, Stdout: stdout, Stderr: stderr}
	rec := decisionlog.FromDecision(d, call, req.Input)
	rec.Surface, rec.ReportedBy = decisionlog.SurfaceHookSidecar, decisionlog.ReportedByGateAgent
	rec.Runtime, rec.Nonce, rec.VolumeVersion, rec.Approval = req.Runtime, req.Nonce, version, hold.approval
	if lp != nil {
		resp.Digest = lp.digest
		rec.Pod, rec.Namespace, rec.Policy = lp.caller.Pod, lp.namespace, lp.policy
	}
	s.metrics.decisions.WithLabelValues(string(d.Verdict), rec.Enforcement, d.Code, d.Layer, d.Rule).Inc()
	return resp, rec
}

// crashed is the reason of a decision that panicked: the panic's type only, since its value
// may quote the input.
func crashed(r any) string { return fmt.Sprintf("gate-agent failed (%T)", r) }
