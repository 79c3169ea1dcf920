// Command confirmer answers the tool-confirmation pauses of Anthropic Managed Agents sessions
// through the gate, and serves the same gate over HTTP to harness and workflow code.
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/confirm"
	"github.com/intutic/gate-operator/internal/confirmerconfig"
	"github.com/intutic/gate-operator/internal/decisionlog"
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
	if limit := setMemoryLimit(cgroupMemoryFiles); limit > 0 {
		log.Info("Go memory limit set from the container's", "bytes", limit)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(liveHeapMetrics)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := confirm.NewMetrics(reg)
	// One record of every decision, on every surface, as NDJSON on stdout (logs go to stderr).
	trail := decisionlog.NewWriter(os.Stdout, decisionlog.WriterOptions{AllowRate: float64(o.RecordAllowRate), AllowBurst: o.RecordAllowBurst, Registerer: reg})
	defer trail.Close()
	decisions := decisionlog.New(trail, trailSource(o), reg)

	g := gate.New(o.Workspace)
	reloader := &confirm.Reloader{Gate: g, Path: o.Snapshot, Workspace: o.Workspace, Log: log.WithName("snapshot"), Metrics: metrics}
	_ = reloader.Load() // until a snapshot verifies, every call is refused and /readyz says why

	api := &gateapi.API{Gate: g, HarnessSettings: o.HarnessSettings, Decisions: decisions, Gatherer: reg, Log: log.WithName("gate")}

	var kube, reviews kubernetes.Interface
	var kcfg *rest.Config
	if needsKube(o) {
		var err error
		if kcfg, err = kubeConfig(o.Kubeconfig); err != nil {
			return fmt.Errorf("the Kubernetes API (for TokenReview, the Leases and the ToolApprovals): %w", err)
		}
		if kube, reviews, err = kubeClients(kcfg); err != nil {
			return err
		}
	}
	if !o.InsecureNoAuth {
		api.Auth = &gateapi.Authenticator{Reviewer: reviews.AuthenticationV1().TokenReviews(), Allowed: o.AllowedServiceAccounts, Audience: o.TokenAudience}
	} else {
		log.Info("WARNING: the gate API is served without authentication (--insecure-no-auth, loopback only)")
	}

	var wg sync.WaitGroup
	approvals, watchApprovals, err := startApprovals(ctx, &wg, o, kcfg, kube, metrics, decisions, log.WithName("approvals"))
	if err != nil {
		stop()
		wg.Wait()
		return err
	}
	api.Approvals = approvals
	var confirmer *confirm.Confirmer
	if o.AnthropicAPIKeyFile != "" {
		roots, err := rootCAs(o.AnthropicCAFile)
		if err != nil {
			return err
		}
		client, err := anthropic.NewClient(anthropic.ClientOptions{BaseURL: o.AnthropicBaseURL, APIKeyFile: o.AnthropicAPIKeyFile, WorkspaceID: o.AnthropicWorkspaceID, RootCAs: roots})
		if err != nil {
			return err
		}
		confirmer = &confirm.Confirmer{Client: client, Gate: g, Deadline: o.HumanApprovalDeadline, Log: log.WithName("confirmer"),
			Decisions: decisions, Metrics: metrics, Approvals: approvals}
		if o.MembersLease != "" {
			confirmer.Shard = confirm.NewShard(identity(o))
		}
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

	watchApprovals(confirmer)

	if confirmer != nil {
		watchSessions(ctx, &wg, o, confirmer, kube, log)
	}

	servers := httpServers(api, o)
	errc := listenAndServe(servers)
	log.Info("confirmer serving", "listen", o.Listen, "metricsListen", o.MetricsListen, "tokenAudience", o.TokenAudience, "snapshot", o.Snapshot, "agents", strings.Join(o.AgentIDs, ","), "webhook", api.Webhook != nil, "leaderElect", o.LeaderElect, "membersLease", o.MembersLease)

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
	err = shutdown(sctx, servers)
	wg.Wait()
	return err
}

// trailSource is what the confirmer stamps on its decision records: its namespace (--namespace,
// else the pod's), SessionConfirmer and policy, as far as its flags name them.
func trailSource(o confirmerconfig.Config) decisionlog.Source {
	src := decisionlog.Source{ReportedBy: decisionlog.ReportedByConfirmer, Namespace: o.Namespace, Confirmer: o.ConfirmerName}
	if src.Namespace == "" {
		src.Namespace = leaseNamespace(confirmerconfig.Config{})
	}
	if o.Policy != "" && src.Namespace != "" {
		src.Policy = src.Namespace + "/" + o.Policy
	}
	return src
}

// listenAndServe runs each server; the channel receives the error of any that stops.
func listenAndServe(servers []*http.Server) <-chan error {
	errc := make(chan error, len(servers))
	for _, srv := range servers {
		go func() { errc <- srv.ListenAndServe() }()
	}
	return errc
}

// shutdown shuts every server down within ctx.
func shutdown(ctx context.Context, servers []*http.Server) error {
	var err error
	for _, srv := range servers {
		err = errors.Join(err, srv.Shutdown(ctx))
	}
	return err
}

// httpServers are the gate API's server on --listen and, unless --metrics-listen is empty, the
// metrics server apart from it; the defaults bound slow and idle clients on both.
func httpServers(api *gateapi.API, o confirmerconfig.Config) []*http.Server {
	servers := []*http.Server{api.NewServer(o.Listen, gateapi.ServerOptions{})}
	if o.MetricsListen != "" {
		servers = append(servers, api.NewMetricsServer(o.MetricsListen, gateapi.ServerOptions{}))
	}
	return servers
}

// needsKube reports whether the confirmer talks to the Kubernetes API: for TokenReview, a
// Lease, or the ToolApprovals.
func needsKube(o confirmerconfig.Config) bool {
	return !o.InsecureNoAuth || o.LeaderElect || o.MembersLease != "" || o.ConfirmerName != ""
}

// liveHeapMetrics adds go_gc_heap_live_bytes (the heap the last collection found reachable:
// what the confirmer needs, without the garbage that heap-in-use also counts) and the count of
// collections to the Go collector's defaults; the memory benchmark reads them.
var liveHeapMetrics = collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/(heap/live:bytes|cycles/total:gc-cycles)$`)}

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

// rootCAs is the system roots plus the certificates in file; nil (the system roots) without one.
func rootCAs(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--anthropic-ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool() // a static image may have no roots: the file's are enough
	}
	if !pool.AppendCertsFromPEM(raw) {
		return nil, fmt.Errorf("--anthropic-ca-file %s holds no PEM certificate", file)
	}
	return pool, nil
}

func kubeConfig(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	return rest.InClusterConfig()
}
