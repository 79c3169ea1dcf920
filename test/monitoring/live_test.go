package monitoring

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/agentproto"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateagent/gateagenttest"
	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/promquery"
	"github.com/intutic/gate-operator/internal/promquery/promquerytest"
	"github.com/intutic/gate-operator/internal/promscrape"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestQueriesAreServed runs the three components as their pods run them (the binaries, built
// here) and drives each through the work its metrics count: the manager against a real API
// server with the samples and a serving certificate, the confirmer answering a fake Sessions
// API with a call blocked, one allowed and one held as a ToolApproval, and a gate-agent
// deciding a hook call. Every metric and label the chart's dashboard and alert rules read must
// be in what the three serve.
func TestQueriesAreServed(t *testing.T) {
	root := repoRoot(t)
	chart, err := promquery.ChartQueries(filepath.Join(root, "charts", "gate-operator"))
	if err != nil {
		t.Fatal(err)
	}
	queries := promquerytest.Parse(t, chart)
	bin := buildBinaries(t, root, "manager", "confirmer", "gate-agent")
	ctx := testutil.Context(t, 4*time.Minute)

	cfg, kubeconfigData := apiservertest.StartAdmin(t, true, "monitoring-test")
	dir := t.TempDir()
	kubeconfig := writeFile(t, dir, "kubeconfig", kubeconfigData)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = gatev1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gate-system"}}); err != nil {
		t.Fatal(err)
	}
	samples := &localenv.Env{Root: root, Client: c}
	if err := samples.ApplySamples(ctx, localenv.Samples{Namespace: "agents", APIKey: "sk-ant-test", WebhookKey: "whsec_dGVzdA==", BaseURL: "https://api.anthropic.invalid", AgentID: "agent_test"}); err != nil {
		t.Fatal(err)
	}

	// The manager, with its webhooks on a certificate another issuer wrote (the metric reads
	// the file either way).
	certDir := filepath.Join(dir, "webhook-certs")
	writeCert(t, certDir)
	managerMetrics := freeAddr(t)
	start(t, "manager", []string{"KUBECONFIG=" + kubeconfig}, filepath.Join(bin, "manager"),
		"--metrics-bind-address="+managerMetrics, "--metrics-secure=false", "--health-probe-bind-address=0",
		"--webhook-port="+freePort(t), "--webhook-certs=external", "--webhook-cert-dir="+certDir,
		"--egress-canary-port=0", "--nameserver=127.0.0.1:1")

	// The confirmer: one replica sharing its sessions through a members Lease, with the human
	// lane on.
	const key = "sk-ant-monitoring-test"
	fake := anthropictest.NewTLS(key)
	t.Cleanup(fake.Close)
	fake.AddSession("sesn_mon", "agent_mon",
		anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "rm -rf /"}, Permission: "ask"},
		anthropictest.ToolUse{Name: "read", Input: map[string]any{"file_path": "README.md"}, Permission: "ask"},
		anthropictest.ToolUse{Type: "agent.mcp_tool_use", MCPServer: "deploy", Name: "run", Input: map[string]any{"env": "prod"}, Permission: "ask"},
	)
	snap, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1}, []gate.Rule{
		{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.matches("rm\\s+-rf\\s+/")`, Action: gate.Block, Reason: "destructive"},
		{Name: "deploys-need-human", Tools: []string{"mcp__deploy__*"}, Action: gate.Ask, Reason: "deploys need a human"},
	})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := snap.Encode()
	snapshot := writeFile(t, dir, gate.SnapshotFileName, data)
	apiKey := writeFile(t, dir, "api-key", []byte(key))
	if err := fake.WriteCA(filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	confirmerMetrics := freeAddr(t)
	start(t, "confirmer", nil, filepath.Join(bin, "confirmer"), "--listen", freeAddr(t), "--metrics-listen", confirmerMetrics, "--insecure-no-auth",
		"--snapshot", snapshot, "--anthropic-base-url", fake.URL, "--anthropic-api-key-file", apiKey, "--anthropic-ca-file", filepath.Join(dir, "ca.pem"),
		"--agent-ids", "agent_mon", "--poll-interval", "1s", "--kubeconfig", kubeconfig,
		"--members-lease", "agents-confirmer", "--leader-election-namespace", "agents", "--leader-election-identity", "confirmer-0",
		"--confirmer-name", "agents", "--confirmer-uid", "0b7e1c3a-9d7e-4c5b-8f3e-2a1b0c9d8e7f", "--namespace", "agents", "--policy", "coding-agents",
		"--human-approval-deadline", "5m")

	// A gate-agent sidecar, asked one hook call.
	agentSnap, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1}, []gate.Rule{{Name: "no-stop", Tools: []string{"task_stop"}, Action: gate.Block, Reason: "no"}})
	if err != nil {
		t.Fatal(err)
	}
	vol := gateagenttest.NewVolume(t, gateagenttest.SnapshotFiles(t, agentSnap, nil, "pod-0"))
	socket := gateagenttest.SocketPath(t)
	agentMetrics := freeAddr(t)
	start(t, "gate-agent", nil, filepath.Join(bin, "gate-agent"), "--bundle-dir", vol.Dir, "--socket", socket,
		"--fallback-spool", filepath.Join(dir, "spool"), "--health-bind-address", freeAddr(t), "--metrics-bind-address", agentMetrics)
	testutil.Eventually(t, 30*time.Second, func() error {
		_, err := gateagenttest.Ask(socket, agentproto.Request{Nonce: gateagenttest.Nonce(1), Runtime: "claude-code", Version: vol.Version(),
			Input: gateagenttest.Payload("TaskStop", map[string]any{"task_id": "t"})})
		return err
	})

	// Each component has served what its work counts: the series of a labelled metric appear
	// only once something is counted.
	scrapes := map[string]map[string]*dto.MetricFamily{}
	for _, s := range []struct {
		name, url string
		want      []string
	}{
		{"manager", "http://" + managerMetrics + "/metrics", []string{"gate_operator_policy_ready", "gate_operator_confirmer_replicas", "gate_operator_webhook_certificate_expiration_timestamp_seconds", "controller_runtime_reconcile_total"}},
		{"confirmer", "http://" + confirmerMetrics + "/metrics", []string{"gate_decisions_total", "gate_decision_duration_seconds", "confirmer_tool_approvals_total", "confirmer_members", "gate_decision_records_dropped_total"}},
		{"gate-agent", "http://" + agentMetrics + "/metrics", []string{"gate_agent_decisions_total", "gate_agent_decision_duration_seconds", "gate_decision_records_dropped_total"}},
	} {
		testutil.Eventually(t, time.Minute, func() error {
			families, err := promscrape.Families(s.url, "")
			if err != nil {
				return err
			}
			for _, name := range s.want {
				if len(families[name].GetMetric()) == 0 {
					return fmt.Errorf("the %s serves no %s yet", s.name, name)
				}
			}
			scrapes[s.name] = families
			return nil
		})
	}
	served := promquery.ServedBy(scrapes["manager"], scrapes["confirmer"], scrapes["gate-agent"])
	for _, p := range promquery.Check(served, queries) {
		t.Errorf("%s", p)
	}
	if t.Failed() {
		return
	}
	metrics := promquery.Metrics(queries)
	t.Logf("%d queries read %d metrics, all served: %s", len(queries), len(metrics), strings.Join(metrics, ", "))
}

// buildBinaries builds the commands of cmd/ named into a directory, as make build does.
func buildBinaries(t *testing.T, root string, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return dir
}

// start runs a component until the test ends; its output is logged if the test fails.
func start(t *testing.T, name string, env []string, path string, args ...string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	out := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
}

// writeCert writes a self-signed serving certificate into dir.
func writeCert(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "tls.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, dir, "tls.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// freeAddr is a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// freePort is a port no one listens on now.
func freePort(t *testing.T) string {
	_, port, _ := net.SplitHostPort(freeAddr(t))
	return port
}
