package gate_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
)

// TestEnforcement: in Audit the gate decides as usual, but an Ask or Block is recorded in
// Would and the call proceeds; an audited rule never changes what the enforced rules decide.
func TestEnforcement(t *testing.T) {
	audit := func(r gate.Rule) gate.Rule { r.Enforcement = gate.Audit; return r }
	enforce := func(r gate.Rule) gate.Rule { r.Enforcement = gate.Enforce; return r }
	blockRM := gate.Rule{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.contains("rm -rf /")`, Action: gate.Block, Reason: "destructive command", Code: "destructive_command"}
	blockRoot := gate.Rule{Name: "no-root", Tools: []string{"bash"}, When: `input.command.contains("/")`, Action: gate.Block, Reason: "no paths from the root"}
	askRM := gate.Rule{Name: "ask-rm", Tools: []string{"bash"}, When: `input.command.startsWith("rm ")`, Action: gate.Ask, Reason: "removing needs a human"}
	allowLS := gate.Rule{Name: "allow-ls", Tools: []string{"bash"}, When: `input.command.startsWith("ls")`, Action: gate.Allow, Reason: "listing is fine"}
	erroring := gate.Rule{Name: "needs-field", Tools: []string{"bash"}, When: `input.missing == "x"`, Action: gate.Allow, Reason: "never"}
	auditPolicy := gate.PolicyMeta{Enforcement: gate.Audit}

	type want struct {
		verdict            gate.Verdict
		rule, code, reason string
	}
	cases := []struct {
		name  string
		meta  gate.PolicyMeta
		rules []gate.Rule
		call  *gate.Call
		want  want
		would *gate.AuditedVerdict // nil: nothing recorded
	}{
		{"Audit policy: a Block proceeds as would-block", auditPolicy, []gate.Rule{blockRM}, bash("rm -rf /"),
			want{gate.Allow, "", "", "no enforced rule matched"}, &gate.AuditedVerdict{gate.Block, "no-root-rm", "destructive command", "destructive_command"}},
		{"Audit policy: an Ask proceeds as would-ask", auditPolicy, []gate.Rule{askRM}, bash("rm x"),
			want{gate.Allow, "", "", "no enforced rule matched"}, &gate.AuditedVerdict{gate.Ask, "ask-rm", "removing needs a human", ""}},
		{"Audit policy: the most restrictive audited verdict is recorded", auditPolicy, []gate.Rule{askRM, blockRoot, blockRM}, bash("rm -rf /"),
			want{gate.Allow, "", "", "no enforced rule matched"}, &gate.AuditedVerdict{gate.Block, "no-root", "no paths from the root", ""}},
		{"Audit policy: defaultAction Block proceeds as would-block", gate.PolicyMeta{Enforcement: gate.Audit, DefaultAction: gate.Block}, []gate.Rule{blockRM}, bash("ls"),
			want{gate.Allow, "", "", "no rule matched"}, &gate.AuditedVerdict{gate.Block, "", "no rule allows this call and the policy's defaultAction is Block", gate.CodeDefaultAction}},
		{"Audit policy: an Allow is an Allow", auditPolicy, []gate.Rule{blockRM, allowLS}, bash("ls"),
			want{gate.Allow, "", "", "no enforced rule matched"}, nil},
		{"Audit policy: a rule set to Enforce blocks", auditPolicy, []gate.Rule{enforce(blockRM)}, bash("rm -rf /"),
			want{gate.Block, "no-root-rm", "destructive_command", "destructive command"}, nil},
		{"Enforce policy: a rule set to Audit proceeds as would-block", gate.PolicyMeta{}, []gate.Rule{audit(blockRM)}, bash("rm -rf /"),
			want{gate.Allow, "", "", "no enforced rule matched"}, &gate.AuditedVerdict{gate.Block, "no-root-rm", "destructive command", "destructive_command"}},
		{"an enforced Block beats an audited Block before it", gate.PolicyMeta{}, []gate.Rule{audit(blockRM), blockRoot}, bash("rm -rf /"),
			want{gate.Block, "no-root", "", "no paths from the root"}, nil},
		{"an enforced Block beats an audited Block after it", gate.PolicyMeta{}, []gate.Rule{blockRoot, audit(blockRM)}, bash("rm -rf /"),
			want{gate.Block, "no-root", "", "no paths from the root"}, nil},
		{"an enforced Ask holds, and the audited Block is recorded", gate.PolicyMeta{}, []gate.Rule{askRM, audit(blockRM)}, bash("rm -rf /"),
			want{gate.Ask, "ask-rm", "", "removing needs a human"}, &gate.AuditedVerdict{gate.Block, "no-root-rm", "destructive command", "destructive_command"}},
		{"an enforced Allow proceeds, and the audited Block is recorded", gate.PolicyMeta{}, []gate.Rule{allowLS, audit(blockRoot)}, bash("ls /"),
			want{gate.Allow, "allow-ls", "", "listing is fine"}, &gate.AuditedVerdict{gate.Block, "no-root", "no paths from the root", ""}},
		// An audited rule is never a way around the enforced defaultAction.
		{"an audited Block does not lift an enforced defaultAction Block", gate.PolicyMeta{DefaultAction: gate.Block}, []gate.Rule{audit(blockRM)}, bash("rm -rf /"),
			want{gate.Block, "", gate.CodeDefaultAction, "no enforced rule allows this call and the policy's defaultAction is Block"}, nil},
		{"an audited Allow does not lift an enforced defaultAction Block", gate.PolicyMeta{DefaultAction: gate.Block}, []gate.Rule{audit(allowLS)}, bash("ls"),
			want{gate.Block, "", gate.CodeDefaultAction, "no enforced rule allows this call and the policy's defaultAction is Block"}, nil},
		{"an audited Block under an enforced defaultAction Ask", gate.PolicyMeta{DefaultAction: gate.Ask}, []gate.Rule{audit(blockRM)}, bash("rm -rf /"),
			want{gate.Ask, "", gate.CodeDefaultAction, "no enforced rule matched; the policy's defaultAction is Ask"}, &gate.AuditedVerdict{gate.Block, "no-root-rm", "destructive command", "destructive_command"}},
		// An audited rule that cannot be evaluated gates nothing: its rule_error is recorded.
		{"an audited rule's error under Fail is a would-block", gate.PolicyMeta{}, []gate.Rule{audit(erroring)}, bash("ls"),
			want{gate.Allow, "", "", "no enforced rule matched"}, &gate.AuditedVerdict{gate.Block, "needs-field", "rule needs-field could not be evaluated: no_such_key", gate.CodeRuleError}},
		{"an audited rule's error under Ignore is skipped", gate.PolicyMeta{FailurePolicy: gate.Ignore}, []gate.Rule{audit(erroring)}, bash("ls"),
			want{gate.Allow, "", "", "no rule matched"}, nil},
		{"an enforced rule's error in an Audit policy blocks", auditPolicy, []gate.Rule{enforce(erroring)}, bash("ls"),
			want{gate.Block, "needs-field", gate.CodeRuleError, "rule needs-field could not be evaluated: no_such_key"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := gateFor(t, tc.meta, tc.rules...).Decide(tc.call)
			got := want{d.Verdict, d.Rule, d.Code, d.Reason}
			if got != tc.want {
				t.Fatalf("decision %+v\nwant       %+v", got, tc.want)
			}
			if tc.would == nil {
				if d.Would != nil || d.Mode() != gate.Enforce || d.AuditNote() != "" {
					t.Fatalf("nothing is audited, but would=%+v mode=%s note=%q", d.Would, d.Mode(), d.AuditNote())
				}
				return
			}
			if d.Would == nil || *d.Would != *tc.would {
				t.Fatalf("would = %+v, want %+v", d.Would, tc.would)
			}
			verb := map[gate.Verdict]string{gate.Block: "would block: ", gate.Ask: "would ask: "}[tc.would.Verdict]
			if d.Mode() != gate.Audit || d.AuditNote() != gate.AuditPrefix+verb+tc.would.Reason {
				t.Fatalf("mode %s, note %q", d.Mode(), d.AuditNote())
			}
			if d.Verdict != gate.Block && d.Message != "" {
				t.Fatalf("a call that proceeds carries a refusal message %q", d.Message)
			}
		})
	}
}

// TestAuditNeverWeakensAFault: a call the gate could not evaluate is refused in Audit as in
// Enforce; an unevaluated call is not an audited one.
func TestAuditNeverWeakensAFault(t *testing.T) {
	auditAll := gate.PolicyMeta{WorkspaceID: "ws_1", Enforcement: gate.Audit}
	blockRM := gate.Rule{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.contains("rm -rf /")`, Action: gate.Block, Reason: "destructive command"}
	data, err := build(t, auditAll, blockRM).Encode()
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Replace(data, []byte(`"reason":"destructive command"`), []byte(`"reason":"fine"`), 1)
	invalid, err := gate.BuildInvalidSnapshot(gate.PolicyMeta{Policy: "agents/broken", WorkspaceID: "ws_1", Enforcement: gate.Audit}, "spec.rules[0].when: undeclared reference to 'inptu'")
	if err != nil {
		t.Fatal(err)
	}
	invalidData, _ := invalid.Encode()
	expensive := gate.Rule{Name: "expensive", Tools: []string{"bash"}, Action: gate.Block, Reason: "never", Enforcement: gate.Audit,
		When: `input.command.split("").all(a, input.command.split("").all(b, input.command.split("").all(c, a != "\u0000")))`}
	forBash, _ := gate.CompileFor(build(t, auditAll, blockRM), "Bash", "")
	loaded := func(workspace string, data []byte) func() gate.Decision {
		return func() gate.Decision {
			g := gate.New(workspace)
			_ = g.Load(data)
			return g.Decide(bash("ls"))
		}
	}

	cases := []struct {
		name   string
		decide func() gate.Decision
		code   string
	}{
		{"no snapshot", func() gate.Decision { return gate.New("ws_1").Decide(bash("ls")) }, gate.CodeSnapshotMissing},
		{"corrupt snapshot", loaded("ws_1", data[:len(data)/2]), gate.CodeSnapshotCorrupt},
		{"tampered snapshot", loaded("ws_1", tampered), gate.CodeSnapshotUnverified},
		{"another workspace", loaded("ws_2", data), gate.CodeSnapshotUnverified},
		{"never compiled", loaded("ws_1", invalidData), gate.CodePolicyInvalid},
		{"crash", func() gate.Decision { return gateFor(t, auditAll, blockRM).Decide(nil) }, gate.CodeGateCrashed},
		{"MCP server posing as another", func() gate.Decision {
			return gateFor(t, auditAll, blockRM).Decide(&gate.Call{Tool: "mcp__github__x", Server: "gitlab", Input: map[string]any{}})
		}, gate.CodeInputInvalid},
		{"input too costly for an audited rule", func() gate.Decision {
			return gateFor(t, gate.PolicyMeta{FailurePolicy: gate.Ignore}, expensive).Decide(bash(strings.Repeat("x", 200)))
		}, gate.CodeInputTooCostly},
		{"another tool than compiled for", func() gate.Decision { return forBash.Decide(&gate.Call{Tool: "Write", Input: map[string]any{}}) }, gate.CodeToolMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.decide()
			if d.Verdict != gate.Block || d.Code != tc.code || d.Would != nil || d.Mode() != gate.Enforce {
				t.Fatalf("got %s/%s would=%+v, want an enforced Block/%s", d.Verdict, d.Code, d.Would, tc.code)
			}
		})
	}
	if invalid.Mode() != gate.Enforce {
		t.Errorf("the snapshot of a policy that never compiled is in %s, want Enforce", invalid.Mode())
	}
}

// TestEnforcementInTheSnapshot: the digest covers the policy's enforcement and each rule's;
// Enforce is written as no field, so a snapshot in Enforce reads as one written before
// enforcement existed (the goldens hold that), and an unknown mode is refused.
func TestEnforcementInTheSnapshot(t *testing.T) {
	meta := gate.PolicyMeta{Policy: "agents/p", Generation: 1}
	rules := func(e ...gate.Enforcement) []gate.Rule {
		rs := goldenRules()
		for i, m := range e {
			rs[i].Enforcement = m
		}
		return rs
	}
	digest := func(m gate.PolicyMeta, rs []gate.Rule) (*gate.Snapshot, []byte) {
		s, err := gate.BuildSnapshot(m, rs)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := s.Encode()
		return s, data
	}
	base, baseData := digest(meta, rules())
	explicit, explicitData := digest(gate.PolicyMeta{Policy: "agents/p", Generation: 1, Enforcement: gate.Enforce}, rules(gate.Enforce))
	if !bytes.Equal(baseData, explicitData) || bytes.Contains(baseData, []byte("enforcement")) {
		t.Fatalf("Enforce, stated or not, must encode as no field:\n%s\n%s", baseData, explicitData)
	}
	auditMeta := meta
	auditMeta.Enforcement = gate.Audit
	audited, auditedData := digest(auditMeta, rules(gate.Audit, gate.Enforce))
	overridden, _ := digest(meta, rules(gate.Audit))
	for name, s := range map[string]*gate.Snapshot{"policy enforcement": audited, "rule enforcement": overridden} {
		if s.Digest == base.Digest {
			t.Errorf("changing the %s left the digest unchanged", name)
		}
	}
	if base.Mode() != gate.Enforce || explicit.AuditedRules() != 0 || audited.Mode() != gate.Audit || overridden.Mode() != gate.Enforce {
		t.Fatalf("modes: base %s, audited %s, overridden %s", base.Mode(), audited.Mode(), overridden.Mode())
	}
	// In the Audit policy rule 0 says Audit (the policy's: not written) and rule 1 Enforce.
	var enc struct {
		Enforcement gate.Enforcement `json:"enforcement"`
		Rules       []gate.Rule      `json:"rules"`
	}
	if err := json.Unmarshal(auditedData, &enc); err != nil {
		t.Fatal(err)
	}
	if enc.Enforcement != gate.Audit || enc.Rules[0].Enforcement != "" || enc.Rules[1].Enforcement != gate.Enforce || audited.AuditedRules() != 3 || overridden.AuditedRules() != 1 {
		t.Fatalf("encoded %+v, audited rules %d and %d", enc, audited.AuditedRules(), overridden.AuditedRules())
	}
	if _, err := gate.LoadSnapshot(auditedData, ""); err != nil {
		t.Fatalf("an Audit snapshot does not load: %v", err)
	}
	unknown := redigest(t, bytes.Replace(auditedData, []byte(`"enforcement":"Audit"`), []byte(`"enforcement":"Off"`), 1))
	if _, err := gate.LoadSnapshot(unknown, ""); err == nil || !strings.Contains(err.Error(), `enforcement "Off"`) {
		t.Fatalf("an unknown enforcement loaded: %v", err)
	}
}
