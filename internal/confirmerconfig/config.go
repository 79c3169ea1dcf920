// Package confirmerconfig is the configuration of the confirmer binary, defined once: the
// flags cmd/confirmer parses and the arguments the SessionConfirmer controller writes into the
// confirmer's Deployment (which the demo also runs as a local process) come from one table of
// fields, so the two cannot drift apart.
//
// It holds no behaviour of the confirmer; internal/confirm and internal/gateapi take their
// settings from cmd/confirmer, not from here.
package confirmerconfig

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/gate"
)

// Config is the confirmer's configuration, one field per flag. A zero field stands for the
// flag's default: Args leaves it out, so parsing fills in the default.
type Config struct {
	Listen                  string
	MetricsListen           string
	Snapshot                string
	HarnessSettings         string
	AnthropicBaseURL        string
	AnthropicAPIKeyFile     string
	AnthropicCAFile         string
	Workspace               string
	AnthropicWorkspaceID    string
	AgentIDs                []string
	PollInterval            time.Duration
	HumanApprovalDeadline   time.Duration
	HumanApprovalShowInput  bool
	ConfirmerName           string
	ConfirmerUID            string
	Namespace               string
	Policy                  string
	AllowedServiceAccounts  []string
	TokenAudience           string
	WebhookSigningKeyFile   string
	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	LeaderElectionIdentity  string
	MembersLease            string
	StreamIdleTimeout       time.Duration
	MaxStreams              int
	WebhookWorkers          int
	WebhookQueue            int
	ShutdownGrace           time.Duration
	RecordAllowRate         int
	RecordAllowBurst        int
	InsecureNoAuth          bool
	Kubeconfig              string
}

// Defaults is the configuration of a confirmer started without flags.
func Defaults() Config {
	return Config{
		Listen:                ":8080",
		MetricsListen:         ":8081",
		Snapshot:              "/opt/intutic/hooks/" + gate.SnapshotFileName,
		AnthropicBaseURL:      anthropic.DefaultBaseURL,
		TokenAudience:         DefaultTokenAudience,
		PollInterval:          10 * time.Second,
		HumanApprovalDeadline: 15 * time.Minute,
		LeaderElectionID:      "gate-confirmer",
		StreamIdleTimeout:     90 * time.Second,
		MaxStreams:            2048,
		WebhookWorkers:        4,
		WebhookQueue:          1024,
		ShutdownGrace:         25 * time.Second,
	}
}

// DefaultTokenAudience is the audience callers' tokens are bound to for a confirmer started
// without --token-audience (gateapi.DefaultTokenAudience). The SessionConfirmer controller
// gives each confirmer its own, TokenAudience.
const DefaultTokenAudience = "gate.intutic.io/confirmer"

// TokenAudience is the audience of the SessionConfirmer namespace/name: the callers of its gate
// API present projected ServiceAccount tokens bound to it, and a token for one confirmer is not
// taken by another.
func TokenAudience(namespace, name string) string {
	return DefaultTokenAudience + "/" + namespace + "/" + name
}

// ServiceName is the Service of the SessionConfirmer name (and its Deployment's name): its gate
// API listens on ServicePort.
func ServiceName(name string) string { return name + "-confirmer" }

// ServicePort is the port of a confirmer's gate API, on its pods and its Service.
const ServicePort = 8080

// AppName is the app.kubernetes.io/name label of every confirmer's pods.
const AppName = "gate-confirmer"

// PodSelector selects the pods of the SessionConfirmer name in its namespace: its Deployment's
// and Service's selector, and the peer of the egress its policy's human lane adds.
func PodSelector(name string) map[string]string {
	return map[string]string{gatev1.LabelConfirmer: name, "app.kubernetes.io/name": AppName}
}

// field is one flag: its name, its help, and a pointer into a Config (*string, *bool, *int,
// *time.Duration or *[]string, the last written comma-separated).
type field struct {
	name, usage string
	ptr         any
}

// fields is the one table of the flags, in the order Args renders them.
func (c *Config) fields() []field {
	return []field{
		{"listen", "address of the gate HTTP API, webhook receiver and probes", &c.Listen},
		{"metrics-listen", "address of /metrics, a listener apart from the gate API's (empty: no metrics served)", &c.MetricsListen},
		{"snapshot", "policy snapshot file (from the policy's bootstrap ConfigMap)", &c.Snapshot},
		{"harness-settings", "harness-settings.json to serve, with the harness-network-policy.json beside it (default: beside the snapshot)", &c.HarnessSettings},
		{"anthropic-base-url", "base URL of the Anthropic API", &c.AnthropicBaseURL},
		{"anthropic-api-key-file", "file holding the Anthropic API key (re-read when it changes)", &c.AnthropicAPIKeyFile},
		{"anthropic-ca-file", "PEM certificates trusted for the Anthropic API besides the system roots (a TLS-inspecting egress proxy, a test fake)", &c.AnthropicCAFile},
		{"workspace", "refuse snapshots of any other workspace", &c.Workspace},
		{"anthropic-workspace-id", "anthropic-workspace-id header, when the key spans workspaces", &c.AnthropicWorkspaceID},
		{"agent-ids", "comma-separated agent ids whose sessions are watched", &c.AgentIDs},
		{"poll-interval", "how often sessions are listed and polled", &c.PollInterval},
		{"human-approval-deadline", "how long an Ask verdict waits for a human before the call is denied", &c.HumanApprovalDeadline},
		{"human-approval-show-input", "put the first 1024 bytes of a held call's input in its ToolApproval (spec.input.preview); off: only its size and SHA-256", &c.HumanApprovalShowInput},
		{"confirmer-name", "the SessionConfirmer this confirmer runs for: with --confirmer-uid, --namespace and --policy, every call the gate sends to a human gets a ToolApproval owned by it, and its answer is sent to the session", &c.ConfirmerName},
		{"confirmer-uid", "the UID of the SessionConfirmer --confirmer-name, for the ToolApprovals' owner reference", &c.ConfirmerUID},
		{"namespace", "the namespace of the SessionConfirmer and its ToolApprovals (default: the pod's namespace)", &c.Namespace},
		{"policy", "the HarnessAgentPolicy whose rules hold the calls, named in each ToolApproval (approvers need the verb approve on it)", &c.Policy},
		{"allowed-service-accounts", "comma-separated namespace/name or namespace/* allowed to call the gate API", &c.AllowedServiceAccounts},
		{"token-audience", "the audience callers' ServiceAccount tokens must be bound to (a projected token with this audience); a token for the API server is refused", &c.TokenAudience},
		{"webhook-signing-key-file", "file holding the Standard Webhooks signing key (whsec_...); empty disables the receiver", &c.WebhookSigningKeyFile},
		{"leader-elect", "standby replicas: run the watch loop only on the replica holding the Lease --leader-election-id (see --members-lease for replicas that share the work)", &c.LeaderElect},
		{"leader-election-namespace", "namespace of the Lease of --leader-elect or --members-lease (default: the pod's namespace)", &c.LeaderElectionNamespace},
		{"leader-election-id", "name of the Lease of --leader-elect", &c.LeaderElectionID},
		{"leader-election-identity", "this replica's identity in the Lease (default: the host name, which is the pod name)", &c.LeaderElectionIdentity},
		{"members-lease", "share the sessions among the replicas that renew their membership in this Lease: each watches the sessions that rendezvous hashing gives it, and takes over a part of those of a replica that stops renewing", &c.MembersLease},
		{"stream-idle-timeout", "drop and reopen a session stream silent for this long", &c.StreamIdleTimeout},
		{"max-streams", "concurrent session streams; other sessions are polled", &c.MaxStreams},
		{"webhook-workers", "workers answering sessions named by webhooks", &c.WebhookWorkers},
		{"webhook-queue", "sessions the webhook queue holds", &c.WebhookQueue},
		{"shutdown-grace", "time given to in-flight requests and confirmations on shutdown", &c.ShutdownGrace},
		{"record-allow-rate", "Allow decision records written per second at most; past it they are dropped and counted, every other record is kept (0: 100)", &c.RecordAllowRate},
		{"record-allow-burst", "Allow decision records written in a burst above --record-allow-rate (0: 200)", &c.RecordAllowBurst},
		{"insecure-no-auth", "development only: serve the gate API without authentication; refused unless --listen is a loopback address", &c.InsecureNoAuth},
		{"kubeconfig", "kubeconfig for TokenReview and leader election (default: in-cluster)", &c.Kubeconfig},
	}
}

// Args renders c as the confirmer's command-line arguments, --name=value (a true bool as
// --name), in the table's order, leaving out zero fields.
func (c Config) Args() []string {
	var args []string
	for _, f := range c.fields() {
		var v string
		switch p := f.ptr.(type) {
		case *string:
			v = *p
		case *[]string:
			v = strings.Join(*p, ",")
		case *time.Duration:
			if *p != 0 {
				v = p.String()
			}
		case *int:
			if *p != 0 {
				v = strconv.Itoa(*p)
			}
		case *bool:
			if *p {
				args = append(args, "--"+f.name)
			}
			continue
		}
		if v != "" {
			args = append(args, "--"+f.name+"="+v)
		}
	}
	return args
}

// RegisterFlags defines the flags on fs, each defaulting to c's value and parsed into c.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	for _, f := range c.fields() {
		switch p := f.ptr.(type) {
		case *string:
			fs.StringVar(p, f.name, *p, f.usage)
		case *[]string:
			fs.Var(listValue{p}, f.name, f.usage)
		case *time.Duration:
			fs.DurationVar(p, f.name, *p, f.usage)
		case *int:
			fs.IntVar(p, f.name, *p, f.usage)
		case *bool:
			fs.BoolVar(p, f.name, *p, f.usage)
		default:
			panic(fmt.Sprintf("confirmerconfig: flag %s has an unsupported type %T", f.name, f.ptr))
		}
	}
}

// Parse parses args into a Config that starts from Defaults, and validates it.
func Parse(fs *flag.FlagSet, args []string) (Config, error) {
	c := Defaults()
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks what the flags require of each other; each error names the flag at fault.
// The syntax of --allowed-service-accounts is checked where it is used
// (gateapi.ValidateAllowList).
func (c Config) Validate() error {
	if c.AnthropicAPIKeyFile == "" && len(c.AgentIDs) > 0 {
		return errors.New("--anthropic-api-key-file is required to watch sessions")
	}
	if c.InsecureNoAuth && !loopback(c.Listen) {
		return fmt.Errorf("--insecure-no-auth is refused: --listen %q is not a loopback address", c.Listen)
	}
	if c.TokenAudience == "" {
		return errors.New("--token-audience is required: callers' tokens are bound to it")
	}
	if c.MetricsListen != "" && c.MetricsListen == c.Listen {
		return fmt.Errorf("--metrics-listen %q is --listen: /metrics is served apart from the gate API", c.MetricsListen)
	}
	if c.MembersLease != "" && c.AnthropicAPIKeyFile == "" {
		return errors.New("--members-lease needs --anthropic-api-key-file: the replicas share the answering of sessions")
	}
	if c.LeaderElect && c.MembersLease != "" {
		return errors.New("--leader-elect and --members-lease exclude each other: standby replicas or replicas sharing the sessions")
	}
	if (c.ConfirmerName != "") != (c.ConfirmerUID != "") || (c.ConfirmerName != "") != (c.Policy != "") {
		return errors.New("--confirmer-name, --confirmer-uid and --policy go together: they turn on the ToolApprovals")
	}
	if c.WebhookSigningKeyFile != "" && c.AnthropicAPIKeyFile == "" {
		return errors.New("--webhook-signing-key-file needs --anthropic-api-key-file")
	}
	return nil
}

// loopback reports whether a listen address binds only to a loopback interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listValue is a comma-separated list flag; blanks around and between items are dropped.
type listValue struct{ p *[]string }

func (l listValue) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l listValue) Set(s string) error {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	*l.p = out
	return nil
}
