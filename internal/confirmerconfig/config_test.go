package confirmerconfig

import (
	"flag"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func parse(t *testing.T, args []string) Config {
	t.Helper()
	fs := flag.NewFlagSet("confirmer", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := Parse(fs, args)
	if err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return c
}

// full sets every field to a value other than its zero and its default, but for LeaderElect:
// it excludes MembersLease (fullStandby sets it instead).
func full() Config {
	return Config{
		Listen:                  "127.0.0.1:9090",
		MetricsListen:           "127.0.0.1:9091",
		Snapshot:                "/etc/gate/bootstrap/policy-snapshot.rules",
		HarnessSettings:         "/etc/gate/bootstrap/harness-settings.json",
		AnthropicBaseURL:        "https://anthropic.example.org",
		AnthropicAPIKeyFile:     "/etc/gate/anthropic/api-key",
		AnthropicCAFile:         "/etc/gate/ca/proxy.pem",
		Workspace:               "ws_123",
		AnthropicWorkspaceID:    "wrkspc_1",
		AgentIDs:                []string{"agent_1", "agent_2"},
		PollInterval:            3 * time.Second,
		HumanApprovalDeadline:   90 * time.Minute,
		HumanApprovalShowInput:  true,
		ConfirmerName:           "coding-agents",
		ConfirmerUID:            "6d3c9b1e-2f4a-4c55-9d0e-7a1b2c3d4e5f",
		Namespace:               "agents",
		Policy:                  "coding-agents",
		AllowedServiceAccounts:  []string{"agents/orchestrator", "tools/*"},
		TokenAudience:           "gate.intutic.io/confirmer/agents/coding-agents",
		WebhookSigningKeyFile:   "/etc/gate/webhook/signing-key",
		LeaderElectionNamespace: "agents",
		LeaderElectionID:        "coding-agents-confirmer",
		LeaderElectionIdentity:  "pod-1",
		MembersLease:            "coding-agents-confirmer",
		StreamIdleTimeout:       45 * time.Second,
		MaxStreams:              16,
		WebhookWorkers:          2,
		WebhookQueue:            64,
		ShutdownGrace:           5 * time.Second,
		RecordAllowRate:         50,
		RecordAllowBurst:        80,
		InsecureNoAuth:          true,
		Kubeconfig:              "/home/me/.kube/config",
	}
}

// fullStandby is full with standby replicas (--leader-elect) instead of shared sessions.
func fullStandby() Config {
	c := full()
	c.LeaderElect, c.MembersLease = true, ""
	return c
}

// TestArgsRoundTrip: a Config rendered as arguments parses back into the same Config, with
// every field set (in full or fullStandby), with the defaults, and from zero (which stands for
// the defaults).
func TestArgsRoundTrip(t *testing.T) {
	c, s, d := full(), fullStandby(), Defaults()
	v, sv, dv := reflect.ValueOf(c), reflect.ValueOf(s), reflect.ValueOf(d)
	for i := range v.NumField() {
		covered := func(f reflect.Value) bool {
			return !f.IsZero() && !reflect.DeepEqual(f.Interface(), dv.Field(i).Interface())
		}
		if name := v.Type().Field(i).Name; !covered(v.Field(i)) && !covered(sv.Field(i)) {
			t.Fatalf("full() and fullStandby() leave %s at its zero or default value: the round trip would not cover it", name)
		}
	}
	for _, c := range []Config{c, s} {
		if got := parse(t, c.Args()); !reflect.DeepEqual(got, c) {
			t.Errorf("every field set:\nargs %q\nparsed %+v\nwant   %+v", c.Args(), got, c)
		}
	}
	if got := parse(t, d.Args()); !reflect.DeepEqual(got, d) {
		t.Errorf("defaults:\nargs %q\nparsed %+v\nwant   %+v", d.Args(), got, d)
	}
	if args := (Config{}).Args(); len(args) != 0 {
		t.Errorf("a zero Config renders %q, want nothing", args)
	}
	if got := parse(t, nil); !reflect.DeepEqual(got, d) {
		t.Errorf("no arguments: %+v, want the defaults %+v", got, d)
	}
}

// TestArgsForm pins the form of the arguments: the SessionConfirmer's Deployment carries them,
// and the demo and the e2e rewrite --listen= and the mount paths in them.
func TestArgsForm(t *testing.T) {
	got := full().Args()
	want := []string{
		"--listen=127.0.0.1:9090", "--metrics-listen=127.0.0.1:9091", "--snapshot=/etc/gate/bootstrap/policy-snapshot.rules",
		"--harness-settings=/etc/gate/bootstrap/harness-settings.json", "--anthropic-base-url=https://anthropic.example.org",
		"--anthropic-api-key-file=/etc/gate/anthropic/api-key", "--anthropic-ca-file=/etc/gate/ca/proxy.pem", "--workspace=ws_123",
		"--anthropic-workspace-id=wrkspc_1", "--agent-ids=agent_1,agent_2", "--poll-interval=3s", "--human-approval-deadline=1h30m0s",
		"--human-approval-show-input", "--confirmer-name=coding-agents", "--confirmer-uid=6d3c9b1e-2f4a-4c55-9d0e-7a1b2c3d4e5f", "--namespace=agents",
		"--policy=coding-agents",
		"--allowed-service-accounts=agents/orchestrator,tools/*", "--token-audience=gate.intutic.io/confirmer/agents/coding-agents", "--webhook-signing-key-file=/etc/gate/webhook/signing-key",
		"--leader-election-namespace=agents", "--leader-election-id=coding-agents-confirmer",
		"--leader-election-identity=pod-1", "--members-lease=coding-agents-confirmer", "--stream-idle-timeout=45s", "--max-streams=16", "--webhook-workers=2",
		"--webhook-queue=64", "--shutdown-grace=5s", "--record-allow-rate=50", "--record-allow-burst=80", "--insecure-no-auth", "--kubeconfig=/home/me/.kube/config",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("args\n%q\nwant\n%q", got, want)
	}
	// The space-separated form the tests and benchmarks use parses the same way.
	if c := parse(t, []string{"--listen", "127.0.0.1:1", "--agent-ids", " a, ,b ", "--anthropic-api-key-file", "k"}); !slices.Equal(c.AgentIDs, []string{"a", "b"}) {
		t.Fatalf("agent ids %q", c.AgentIDs)
	}
}

// TestValidateNamesTheFlag: every refusal names the flag at fault.
func TestValidateNamesTheFlag(t *testing.T) {
	for want, args := range map[string][]string{
		"--anthropic-api-key-file":           {"--agent-ids=agent_1"},
		"--insecure-no-auth":                 {"--listen=:8080", "--insecure-no-auth"},
		"--token-audience":                   {"--token-audience="},
		"--metrics-listen":                   {"--metrics-listen=:8080"},
		"--webhook-signing-key-file":         {"--webhook-signing-key-file=/k"},
		"poll-interval":                      {"--poll-interval=often"},
		"max-streams":                        {"--max-streams=many"},
		"--members-lease":                    {"--members-lease=l"},
		"--confirmer-uid":                    {"--confirmer-name=c", "--policy=p"},
		"--leader-elect and --members-lease": {"--anthropic-api-key-file=k", "--leader-elect", "--members-lease=l"},
	} {
		fs := flag.NewFlagSet("confirmer", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, err := Parse(fs, args); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", args, err, want)
		}
	}
}

// TestMetricsApartAndAudience: by default /metrics has a listener of its own, not the gate
// API's, and callers' tokens are bound to the confirmer's audience; a SessionConfirmer's
// audience names it.
func TestMetricsApartAndAudience(t *testing.T) {
	d := parse(t, nil)
	if d.MetricsListen == "" || d.MetricsListen == d.Listen {
		t.Errorf("metrics listen %q, API listen %q: want a listener of its own", d.MetricsListen, d.Listen)
	}
	if d.TokenAudience != DefaultTokenAudience {
		t.Errorf("token audience %q, want %s", d.TokenAudience, DefaultTokenAudience)
	}
	if got := TokenAudience("agents", "coding-agents"); got != "gate.intutic.io/confirmer/agents/coding-agents" {
		t.Errorf("TokenAudience = %q", got)
	}
}
