// Command confirmer answers the tool-confirmation pauses of Anthropic Managed Agents sessions
// through the gate, and serves the same gate over HTTP to harness and workflow code.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/intutic/gate-operator/internal/confirm"
	"github.com/intutic/gate-operator/internal/gate"
)

type options struct {
	listen                   string
	snapshot, workspace      string
	harnessSettings          string
	baseURL, apiKeyFile      string
	anthropicWorkspace       string
	agentIDs                 string
	pollInterval, idle       time.Duration
	maxStreams               int
	webhookKeyFile           string
	deadline                 time.Duration
	allowed                  string
	insecureNoAuth           bool
	kubeconfig               string
	leaderElect              bool
	leaseNamespace, leaseID  string
	identity                 string
	webhookWorkers, queueLen int
	shutdownGrace            time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.listen, "listen", ":8080", "address of the gate HTTP API, webhook receiver, probes and metrics")
	flag.StringVar(&o.snapshot, "snapshot", "/opt/intutic/hooks/"+gate.SnapshotFileName, "policy snapshot file (from the policy's bootstrap ConfigMap)")
	flag.StringVar(&o.workspace, "workspace", "", "refuse snapshots of any other workspace")
	flag.StringVar(&o.harnessSettings, "harness-settings", "", "harness-settings.json to serve (default: beside the snapshot)")
	flag.StringVar(&o.baseURL, "anthropic-base-url", confirm.DefaultBaseURL, "base URL of the Anthropic API")
	flag.StringVar(&o.apiKeyFile, "anthropic-api-key-file", "", "file holding the Anthropic API key (re-read when it changes)")
	flag.StringVar(&o.anthropicWorkspace, "anthropic-workspace-id", "", "anthropic-workspace-id header, when the key spans workspaces")
	flag.StringVar(&o.agentIDs, "agent-ids", "", "comma-separated agent ids whose sessions are watched")
	flag.DurationVar(&o.pollInterval, "poll-interval", 10*time.Second, "how often sessions are listed and polled")
	flag.DurationVar(&o.idle, "stream-idle-timeout", 90*time.Second, "drop and reopen a session stream silent for this long")
	flag.IntVar(&o.maxStreams, "max-streams", 256, "concurrent session streams; other sessions are polled")
	flag.StringVar(&o.webhookKeyFile, "webhook-signing-key-file", "", "file holding the Standard Webhooks signing key (whsec_...); empty disables the receiver")
	flag.DurationVar(&o.deadline, "human-approval-deadline", 15*time.Minute, "how long an Ask verdict waits for a human before the call is denied")
	flag.StringVar(&o.allowed, "allowed-service-accounts", "", "comma-separated namespace/name or namespace/* allowed to call the gate API")
	flag.BoolVar(&o.insecureNoAuth, "insecure-no-auth", false, "development only: serve the gate API without authentication; refused unless --listen is a loopback address")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig for TokenReview and leader election (default: in-cluster)")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "run the watch loop only on the replica holding a Lease")
	flag.StringVar(&o.leaseNamespace, "leader-election-namespace", "", "namespace of the Lease (default: the pod's namespace)")
	flag.StringVar(&o.leaseID, "leader-election-id", "gate-confirmer", "name of the Lease")
	flag.StringVar(&o.identity, "leader-election-identity", "", "this replica's identity in the Lease (default: the host name, which is the pod name)")
	flag.IntVar(&o.webhookWorkers, "webhook-workers", 4, "workers answering sessions named by webhooks")
	flag.IntVar(&o.queueLen, "webhook-queue", 1024, "sessions the webhook queue holds")
	flag.DurationVar(&o.shutdownGrace, "shutdown-grace", 25*time.Second, "time given to in-flight requests and confirmations on shutdown")
	flag.Parse()

	log := logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{}))
	if err := run(o, log); err != nil {
		log.Error(err, "confirmer stopped")
		os.Exit(1)
	}
}

func run(o options, log logr.Logger) error {
	if o.apiKeyFile == "" && o.agentIDs != "" {
		return errors.New("--anthropic-api-key-file is required to watch sessions")
	}
	if o.insecureNoAuth && !loopback(o.listen) {
		return fmt.Errorf("--insecure-no-auth is refused: --listen %q is not a loopback address", o.listen)
	}
	allowed := splitList(o.allowed)
	if err := confirm.ValidateAllowList(allowed); err != nil {
		return fmt.Errorf("--allowed-service-accounts: %w", err)
	}
	if o.harnessSettings == "" {
		o.harnessSettings = filepath.Join(filepath.Dir(o.snapshot), "harness-settings.json")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := confirm.NewMetrics(reg)

	g := gate.New(o.workspace)
	reloader := &confirm.Reloader{Gate: g, Path: o.snapshot, Workspace: o.workspace, Log: log.WithName("snapshot"), Metrics: metrics}
	_ = reloader.Load() // until a snapshot verifies, every call is refused and /readyz says why

	api := &confirm.API{Gate: g, Reloader: reloader, HarnessSettings: o.harnessSettings, Metrics: metrics, Gatherer: reg, Log: log.WithName("gate")}

	var kube, reviews kubernetes.Interface
	if !o.insecureNoAuth || o.leaderElect {
		cfg, err := kubeConfig(o.kubeconfig)
		if err != nil {
			return fmt.Errorf("Kubernetes API (for TokenReview and leader election): %w", err)
		}
		if kube, reviews, err = kubeClients(cfg); err != nil {
			return err
		}
	}
	if !o.insecureNoAuth {
		api.Auth = &confirm.Authenticator{Reviewer: reviews.AuthenticationV1().TokenReviews(), Allowed: allowed}
	} else {
		log.Info("WARNING: the gate API is served without authentication (--insecure-no-auth, loopback only)")
	}

	var wg sync.WaitGroup
	var confirmer *confirm.Confirmer
	if o.apiKeyFile != "" {
		client, err := confirm.NewClient(confirm.ClientOptions{BaseURL: o.baseURL, APIKeyFile: o.apiKeyFile, WorkspaceID: o.anthropicWorkspace})
		if err != nil {
			return err
		}
		confirmer = &confirm.Confirmer{Client: client, Gate: g, Deadline: o.deadline, Log: log.WithName("confirmer"), Metrics: metrics}
		api.Queue = confirm.NewQueue(confirmer, o.queueLen)
		wg.Add(1)
		go func() { defer wg.Done(); api.Queue.Run(ctx, o.webhookWorkers) }()
	}
	if o.webhookKeyFile != "" {
		if confirmer == nil {
			return errors.New("--webhook-signing-key-file needs --anthropic-api-key-file")
		}
		raw, err := os.ReadFile(o.webhookKeyFile)
		if err != nil {
			return fmt.Errorf("--webhook-signing-key-file: %w", err)
		}
		if api.Webhook, err = confirm.NewWebhookVerifier(string(raw)); err != nil {
			return err
		}
	}

	wg.Add(1)
	go func() { defer wg.Done(); _ = reloader.Run(ctx) }()

	if agents := splitList(o.agentIDs); confirmer != nil && len(agents) > 0 {
		watcher := &confirm.Watcher{Confirmer: confirmer, AgentIDs: agents, PollInterval: o.pollInterval, IdleTimeout: o.idle,
			MaxStreams: o.maxStreams, OnReconnect: metrics.Reconnects.Inc}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o.leaderElect {
				ns := o.leaseNamespace
				if ns == "" {
					raw, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
					ns = strings.TrimSpace(string(raw))
				}
				id := o.identity
				if id == "" {
					id, _ = os.Hostname()
				}
				leaderLoop(ctx, kube, ns, o.leaseID, id, log, func(lctx context.Context) { _ = watcher.Run(lctx) })
				return
			}
			_ = watcher.Run(ctx)
		}()
	}

	srv := api.NewServer(o.listen, confirm.ServerOptions{}) // the defaults bound slow and idle clients
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("confirmer serving", "listen", o.listen, "snapshot", o.snapshot, "agents", o.agentIDs, "webhook", api.Webhook != nil, "leaderElect", o.leaderElect)

	select {
	case err := <-errc:
		stop()
		wg.Wait()
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests and confirmations")
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	wg.Wait()
	return err
}

// leaderLoop runs f while this replica holds the Lease, re-entering the election after a loss.
func leaderLoop(ctx context.Context, kube kubernetes.Interface, ns, lease, id string, log logr.Logger, f func(context.Context)) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: lease, Namespace: ns},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true,
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: f,
				OnStoppedLeading: func() { log.Info("lost the watch lease", "identity", id) },
			},
		})
	}
}

// The TokenReview client's own rate limit. Reviews are cached (1 min when authenticated, 10 s
// when not) and collapsed per token, so steady state is a few a minute; 20/s with bursts of
// 50 admits a rollout of many new callers at once while capping what a flood of bogus tokens
// can make the API server do.
const (
	tokenReviewQPS   = 20
	tokenReviewBurst = 50
)

// kubeClients returns the client for leader election (cfg as given) and one for TokenReviews
// with a rate limiter of its own, so callers of the gate API can never delay Lease renewals.
func kubeClients(cfg *rest.Config) (leases, reviews kubernetes.Interface, err error) {
	if leases, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, nil, err
	}
	rc := rest.CopyConfig(cfg)
	rc.RateLimiter = nil // CopyConfig keeps cfg's limiter; the reviews get their own
	rc.QPS, rc.Burst = tokenReviewQPS, tokenReviewBurst
	rc.UserAgent = rest.DefaultKubernetesUserAgent() + " token-review"
	if reviews, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, nil, err
	}
	return leases, reviews, nil
}

func kubeConfig(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	return rest.InClusterConfig()
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

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
