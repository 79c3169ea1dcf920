// Command confirmer answers the tool-confirmation pauses of Anthropic Managed Agents sessions
// through the gate, and serves the same gate over HTTP to harness and workflow code.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
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

	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/confirm"
	"github.com/intutic/gate-operator/internal/confirmerconfig"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateapi"
)

func main() {
	log := logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{}))
	cfg, err := confirmerconfig.Parse(flag.CommandLine, os.Args[1:])
	if err == nil {
		err = run(cfg, log)
	}
	if err != nil {
		log.Error(err, "confirmer stopped")
		os.Exit(1)
	}
}

func run(o confirmerconfig.Config, log logr.Logger) error {
	if err := gateapi.ValidateAllowList(o.AllowedServiceAccounts); err != nil {
		return fmt.Errorf("--allowed-service-accounts: %w", err)
	}
	if o.HarnessSettings == "" {
		o.HarnessSettings = filepath.Join(filepath.Dir(o.Snapshot), "harness-settings.json")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := confirm.NewMetrics(reg)

	g := gate.New(o.Workspace)
	reloader := &confirm.Reloader{Gate: g, Path: o.Snapshot, Workspace: o.Workspace, Log: log.WithName("snapshot"), Metrics: metrics}
	_ = reloader.Load() // until a snapshot verifies, every call is refused and /readyz says why

	api := &gateapi.API{Gate: g, Reloader: reloader, HarnessSettings: o.HarnessSettings, Metrics: metrics, Gatherer: reg, Log: log.WithName("gate")}

	var kube, reviews kubernetes.Interface
	if !o.InsecureNoAuth || o.LeaderElect {
		cfg, err := kubeConfig(o.Kubeconfig)
		if err != nil {
			return fmt.Errorf("the Kubernetes API (for TokenReview and leader election): %w", err)
		}
		if kube, reviews, err = kubeClients(cfg); err != nil {
			return err
		}
	}
	if !o.InsecureNoAuth {
		api.Auth = &gateapi.Authenticator{Reviewer: reviews.AuthenticationV1().TokenReviews(), Allowed: o.AllowedServiceAccounts}
	} else {
		log.Info("WARNING: the gate API is served without authentication (--insecure-no-auth, loopback only)")
	}

	var wg sync.WaitGroup
	var confirmer *confirm.Confirmer
	if o.AnthropicAPIKeyFile != "" {
		client, err := anthropic.NewClient(anthropic.ClientOptions{BaseURL: o.AnthropicBaseURL, APIKeyFile: o.AnthropicAPIKeyFile, WorkspaceID: o.AnthropicWorkspaceID})
		if err != nil {
			return err
		}
		confirmer = &confirm.Confirmer{Client: client, Gate: g, Deadline: o.HumanApprovalDeadline, Log: log.WithName("confirmer"), Metrics: metrics}
		api.Queue = confirm.NewQueue(confirmer, o.WebhookQueue)
		wg.Add(1)
		go func() { defer wg.Done(); api.Queue.Run(ctx, o.WebhookWorkers) }()
	}
	if o.WebhookSigningKeyFile != "" { // Validate made sure the confirmer runs
		raw, err := os.ReadFile(o.WebhookSigningKeyFile)
		if err != nil {
			return fmt.Errorf("--webhook-signing-key-file: %w", err)
		}
		if api.Webhook, err = anthropic.NewWebhookVerifier(string(raw)); err != nil {
			return err
		}
	}

	wg.Add(1)
	go func() { defer wg.Done(); _ = reloader.Run(ctx) }()

	if confirmer != nil && len(o.AgentIDs) > 0 {
		watcher := &confirm.Watcher{Confirmer: confirmer, AgentIDs: o.AgentIDs, PollInterval: o.PollInterval, IdleTimeout: o.StreamIdleTimeout,
			MaxStreams: o.MaxStreams, OnReconnect: metrics.Reconnects.Inc}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o.LeaderElect {
				ns := o.LeaderElectionNamespace
				if ns == "" {
					raw, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
					ns = strings.TrimSpace(string(raw))
				}
				id := o.LeaderElectionIdentity
				if id == "" {
					id, _ = os.Hostname()
				}
				leaderLoop(ctx, kube, ns, o.LeaderElectionID, id, log, func(lctx context.Context) { _ = watcher.Run(lctx) })
				return
			}
			_ = watcher.Run(ctx)
		}()
	}

	srv := api.NewServer(o.Listen, gateapi.ServerOptions{}) // the defaults bound slow and idle clients
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("confirmer serving", "listen", o.Listen, "snapshot", o.Snapshot, "agents", strings.Join(o.AgentIDs, ","), "webhook", api.Webhook != nil, "leaderElect", o.LeaderElect)

	select {
	case err := <-errc:
		stop()
		wg.Wait()
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests and confirmations")
	sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownGrace)
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
