// Command manager runs the gate-operator controllers.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/controllers"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/egress"
	"github.com/intutic/gate-operator/internal/egresscanary"
	"github.com/intutic/gate-operator/internal/webhook"
)

func main() {
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	s, err := parseFlags(flag.CommandLine, os.Args[1:])
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(2)
	}
	if err := run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), s); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// settings are the manager's flags, validated.
type settings struct {
	metricsAddr    string
	metricsSecure  bool
	metricsCertDir string
	probeAddr      string
	leaderElect    bool
	// namespaces are the namespaces served; empty serves every namespace.
	namespaces []string
	// platformNamespaces are the namespaces whose SessionConfirmers may name a policy of
	// another namespace.
	platformNamespaces []string
	dns                egress.DNSSelector
	resolver           *egress.DNSResolver
	resolveMin         time.Duration
	resolveMax         time.Duration
	clusterCIDRs       []netip.Prefix
	bootstrap          bootstrap.Options
	confirmerImage     string
	// apiQPS and apiBurst limit the manager's requests to the API server on the client side;
	// a negative QPS sets no limit and leaves it to the API server's priority and fairness.
	apiQPS   float64
	apiBurst int
	// policyWorkers is how many HarnessAgentPolicies are reconciled at once.
	policyWorkers int
	pprofAddr     string
	// toolApprovalRetention keeps finished ToolApprovals this long; 0 keeps them forever.
	toolApprovalRetention time.Duration
	// webhooks are served when webhooks.Port is not 0.
	webhooks webhook.Options
	// canaryServer is the egress canary every replica serves, and canary the control port every
	// egress NetworkPolicy allows; nil and zero with --egress-canary-port=0.
	canaryServer *egresscanary.Server
	canary       egress.Canary
	// namespace is the manager's own namespace (--egress-canary-namespace, which the chart
	// always sets), where no baseline is published.
	namespace string
	// rerun lets a process run the manager more than once (its tests do): controller names are
	// then not held unique process-wide.
	rerun bool
}

// checkBootstrapFlags refuses, once, what bootstrap.Render would refuse for every policy.
func checkBootstrapFlags(o bootstrap.Options) error {
	if !path.IsAbs(o.MountDir) {
		return fmt.Errorf("--bootstrap-mount-dir %q is not an absolute path", o.MountDir)
	}
	if !path.IsAbs(o.HookBin) {
		return fmt.Errorf("--gate-hook-path %q is not an absolute path", o.HookBin)
	}
	if err := bootstrap.CheckClaudeCodeVersion(o.ClaudeCodeMinimumVersion); err != nil {
		return fmt.Errorf("--claude-code-minimum-version: %w", err)
	}
	return nil
}

// parseFlags binds the manager's flags to fs, parses args and validates them; every error
// names the flag at fault.
func parseFlags(fs *flag.FlagSet, args []string) (*settings, error) {
	var (
		s                      settings
		namespaces             string
		platformNamespaces     string
		dnsPods                string
		resolvConf, nameserver string
		serviceCIDRs, podCIDRs string
	)
	fs.StringVar(&s.metricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.BoolVar(&s.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers whose ServiceAccount token passes a TokenReview and who may get /metrics (SubjectAccessReview); false serves plain HTTP to anyone, for local development")
	fs.StringVar(&s.metricsCertDir, "metrics-cert-dir", "", "directory holding tls.crt and tls.key for the metrics endpoint (reloaded when they change); empty uses a self-signed certificate generated at start-up")
	fs.StringVar(&s.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&s.leaderElect, "leader-elect", false, "elect a leader, so only one of several replicas reconciles")
	fs.StringVar(&namespaces, "namespaces", "", "namespaces to serve, comma-separated: policies and SessionConfirmers elsewhere are ignored, and RBAC is needed only in these; empty serves every namespace")
	fs.StringVar(&platformNamespaces, "platform-namespaces", "", "namespaces whose SessionConfirmers may name a HarnessAgentPolicy of another namespace (spec.policyRef.namespace), comma-separated: the platform layout keeps a confirmer's key, Lease and ToolApprovals out of the agents' namespaces (docs/confirmer.md); empty allows none, and each must be served (--namespaces)")
	fs.StringVar(&s.dns.Namespace, "dns-namespace", egress.DefaultDNSSelector.Namespace, "namespace of the cluster DNS pods that allow-listed sandboxes may query")
	fs.StringVar(&dnsPods, "dns-pod-labels", "k8s-app=kube-dns", "labels of the cluster DNS pods, as key=value[,key=value]")
	fs.DurationVar(&s.resolveMin, "resolve-min-interval", egress.DefaultMinResolveInterval, "floor of the interval at which allowed hosts are re-resolved")
	fs.DurationVar(&s.resolveMax, "resolve-max-interval", egress.DefaultMaxResolveInterval, "cap of the interval at which allowed hosts are re-resolved")
	fs.StringVar(&resolvConf, "resolv-conf", "/etc/resolv.conf", "resolver configuration whose nameservers resolve allowed hosts")
	fs.StringVar(&s.bootstrap.MountDir, "bootstrap-mount-dir", bootstrap.DefaultMountDir, "where sandbox pods mount the bootstrap ConfigMap (absolute)")
	fs.StringVar(&s.bootstrap.HookBin, "gate-hook-path", bootstrap.DefaultHookBin, "where sandbox pods have the gate-hook binary (absolute); every bundle's hook wrapper runs exactly this file")
	fs.StringVar(&s.bootstrap.ClaudeCodeMinimumVersion, "claude-code-minimum-version", bootstrap.DefaultClaudeCodeMinimumVersion, "the managed settings' requiredMinimumVersion: an older Claude Code in a sandbox exits at start; the default is the oldest Claude Code the conformance suite proves (docs/upgrading.md)")
	fs.StringVar(&nameserver, "nameserver", "", "host:port of the DNS server that resolves allowed hosts, instead of the nameservers of --resolv-conf")
	fs.StringVar(&serviceCIDRs, "service-cidrs", egress.DefaultClusterCIDRs, "the cluster's Service ranges, comma-separated: an allowed host's DNS answer inside them is dropped (allowedCIDRs may still cover them); the default, the private ranges, holds most clusters' ranges (docs/egress-carve-outs.md)")
	fs.StringVar(&podCIDRs, "pod-cidrs", egress.DefaultClusterCIDRs, "the cluster's Pod ranges, comma-separated, treated like --service-cidrs")
	fs.StringVar(&s.confirmerImage, "confirmer-image", "ghcr.io/intutic/gate-confirmer:v0.1.0", "image of the confirmer Deployments, unless a SessionConfirmer sets spec.image")
	fs.Float64Var(&s.apiQPS, "kube-api-qps", -1, "client-side limit of the manager's requests per second to the API server; negative sets none and relies on the API server's priority and fairness (controller-runtime's default)")
	fs.IntVar(&s.apiBurst, "kube-api-burst", 1000, "burst of --kube-api-qps, when it is positive")
	fs.IntVar(&s.policyWorkers, "policy-workers", 16, "HarnessAgentPolicies reconciled at once: each reconcile mostly waits on API writes and DNS, so more workers than cores keep the API server busy")
	fs.StringVar(&s.pprofAddr, "pprof-bind-address", "0", "address of the Go pprof endpoints (/debug/pprof/), for profiling; 0 disables them")
	s.toolApprovalRetention = 24 * time.Hour
	fs.Var(retentionFlag{&s.toolApprovalRetention}, "tool-approval-retention", "how long a finished ToolApproval (approved, denied, expired, answered in the runtime) is kept after its decision, as the record of who decided; 0 keeps them until their SessionConfirmer is deleted")
	webhookText := bindWebhookFlags(fs, &s.webhooks)
	canaryText := bindCanaryFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	var err error
	if err := parseNamespaceFlags(&s, namespaces, platformNamespaces); err != nil {
		return nil, err
	}
	if s.metricsCertDir != "" {
		for _, f := range []string{"tls.crt", "tls.key"} {
			if _, err := os.Stat(filepath.Join(s.metricsCertDir, f)); err != nil {
				return nil, fmt.Errorf("--metrics-cert-dir: %w", err)
			}
		}
	}
	if err := checkThroughputFlags(&s); err != nil {
		return nil, err
	}
	if s.dns.Labels, err = labels.ConvertSelectorToLabelsMap(dnsPods); err != nil || len(s.dns.Labels) == 0 {
		return nil, fmt.Errorf("--dns-pod-labels %q is not key=value[,key=value]", dnsPods)
	}
	if strings.TrimSpace(s.dns.Namespace) == "" {
		return nil, errors.New("--dns-namespace is empty")
	}
	if err := checkBootstrapFlags(s.bootstrap); err != nil {
		return nil, err
	}
	services, err := egress.ParsePrefixes(serviceCIDRs)
	if err != nil {
		return nil, fmt.Errorf("--service-cidrs: %w", err)
	}
	pods, err := egress.ParsePrefixes(podCIDRs)
	if err != nil {
		return nil, fmt.Errorf("--pod-cidrs: %w", err)
	}
	s.clusterCIDRs = slices.Concat(services, pods)
	if nameserver != "" {
		if _, _, err := net.SplitHostPort(nameserver); err != nil {
			return nil, fmt.Errorf("--nameserver %q is not host:port", nameserver)
		}
		s.resolver = &egress.DNSResolver{Servers: []string{nameserver}, Timeout: 2 * time.Second}
	} else if s.resolver, err = egress.NewDNSResolver(resolvConf); err != nil {
		return nil, fmt.Errorf("--resolv-conf: %w", err)
	}
	if err := checkWebhookFlags(&s, webhookText); err != nil {
		return nil, err
	}
	if err := checkCanaryFlags(&s, canaryText); err != nil {
		return nil, err
	}
	s.namespace = canaryText.namespace
	return &s, nil
}

// checkThroughputFlags checks the client limits and the number of workers.
func checkThroughputFlags(s *settings) error {
	if s.apiQPS == 0 {
		return errors.New("--kube-api-qps is 0: it would block every request; set it negative for no client-side limit")
	}
	if s.apiQPS > 0 && s.apiBurst < 1 {
		return fmt.Errorf("--kube-api-burst %d is below 1", s.apiBurst)
	}
	if s.policyWorkers < 1 {
		return fmt.Errorf("--policy-workers %d is below 1", s.policyWorkers)
	}
	return nil
}

// parseNamespaceFlags reads --namespaces and --platform-namespaces into s: every platform
// namespace must be served, and the SessionConfirmer webhook learns them too.
func parseNamespaceFlags(s *settings, namespaces, platform string) error {
	var err error
	if s.namespaces, err = parseNamespaces("--namespaces", namespaces); err != nil {
		return err
	}
	if s.platformNamespaces, err = parseNamespaces("--platform-namespaces", platform); err != nil {
		return err
	}
	for _, ns := range s.platformNamespaces {
		if len(s.namespaces) > 0 && !slices.Contains(s.namespaces, ns) {
			return fmt.Errorf("--platform-namespaces: %q is not served (--namespaces %s)", ns, strings.Join(s.namespaces, ","))
		}
	}
	s.webhooks.PlatformNamespaces = s.platformNamespaces
	return nil
}

// parseNamespaces reads a list of namespaces (the flag named flagName): empty is none (for
// --namespaces, every namespace), otherwise distinct namespace names (DNS labels).
func parseNamespaces(flagName, list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var out []string
	for _, ns := range strings.Split(list, ",") {
		ns = strings.TrimSpace(ns)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("%s: %q is not a namespace name: %s", flagName, ns, strings.Join(errs, "; "))
		}
		if slices.Contains(out, ns) {
			return nil, fmt.Errorf("%s: %q is listed twice", flagName, ns)
		}
		out = append(out, ns)
	}
	return out, nil
}

// cacheOptions scopes the cache to the manager's own children (controllers.CacheByObject)
// and, with --namespaces, to those namespaces: every informer, the policies' and
// SessionConfirmers' included, then lists and watches only there. No cached object keeps its
// managedFields: nothing reads them (applies carry whole objects), and they are often the
// largest part of a small object.
func cacheOptions(namespaces []string, reports bool) cache.Options {
	o := cache.Options{ByObject: controllers.CacheByObject(reports), DefaultTransform: cache.TransformStripManagedFields()}
	if len(namespaces) > 0 {
		o.DefaultNamespaces = make(map[string]cache.Config, len(namespaces))
		for _, ns := range namespaces {
			o.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return o
}

// metricsOptions serves /metrics over HTTPS to authenticated and authorized callers unless
// --metrics-secure=false.
func metricsOptions(s *settings) metricsserver.Options {
	o := metricsserver.Options{BindAddress: s.metricsAddr}
	if !s.metricsSecure {
		return o
	}
	o.SecureServing = true
	// TokenReview and SubjectAccessReview against the API server: the manager needs the
	// gate-operator-metrics-auth ClusterRole, a scraper gate-operator-metrics-reader.
	o.FilterProvider = filters.WithAuthenticationAndAuthorization
	o.CertDir = s.metricsCertDir
	// HTTP/1.1 only, as kubebuilder's scaffolding does: the endpoint is reachable before
	// authentication, and HTTP/2's stream resets (CVE-2023-44487, CVE-2023-39325) need not be.
	o.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	return o
}

func run(ctx context.Context, cfg *rest.Config, s *settings) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := gatev1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := reportsv1alpha1.Install(scheme); err != nil {
		return err
	}
	reports, err := reportsServed(cfg)
	if err != nil {
		return err
	}
	var webhooks *webhook.Server
	if s.webhooks.Port != 0 {
		o := s.webhooks
		o.Registerer = metrics.Registry // the serving certificate's expiry
		webhooks = webhook.NewServer(o)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(s.apiQPS), s.apiBurst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		WebhookServer:          webhookServer(webhooks),
		Metrics:                metricsOptions(s),
		HealthProbeBindAddress: s.probeAddr,
		PprofBindAddress:       s.pprofAddr,
		LeaderElection:         s.leaderElect,
		LeaderElectionID:       "gate-operator.gate.intutic.io",
		// A stopping leader gives up the Lease once everything has stopped (the webhook drain
		// last), so another replica leads without waiting for the Lease to expire; the process
		// exits as soon as the manager stops, as this requires.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       ptr.To(shutdownTimeout),
		Cache:                         cacheOptions(s.namespaces, reports),
		Controller:                    config.Controller{SkipNameValidation: &s.rerun},
		Client: client.Options{Cache: &client.CacheOptions{
			// Secrets are never read through a cache.
			DisableFor: []client.Object{&corev1.Secret{}},
		}},
	})
	if err != nil {
		return err
	}
	// A host many policies and ceilings allow is looked up once per TTL.
	resolver := &egress.CachingResolver{Resolver: s.resolver}
	if err := (&controllers.HarnessAgentPolicyReconciler{
		Client:       mgr.GetClient(),
		Recorder:     mgr.GetEventRecorder("gate-operator"),
		Resolver:     resolver,
		DNS:          s.dns,
		Canary:       s.canary,
		ClusterCIDRs: s.clusterCIDRs,
		Bootstrap:    s.bootstrap,
		MinResolve:   s.resolveMin,
		MaxResolve:   s.resolveMax,

		MaxConcurrentReconciles: s.policyWorkers,
		// Cluster policies are cluster-wide: a manager serving some namespaces has no RBAC to
		// read them, and says so.
		ClusterPolicies: len(s.namespaces) == 0,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&controllers.GateExceptionReconciler{Client: mgr.GetClient(), ClusterPolicies: len(s.namespaces) == 0}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := setupClusterPolicies(mgr, s, resolver); err != nil {
		return err
	}
	if err := (&controllers.SessionConfirmerReconciler{
		Client:             mgr.GetClient(),
		APIReader:          mgr.GetAPIReader(),
		ConfirmerImage:     s.confirmerImage,
		PlatformNamespaces: s.platformNamespaces,
		Namespaces:         s.namespaces,
		Bootstrap:          s.bootstrap,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := setupReports(mgr, s, reports); err != nil {
		return err
	}
	if err := setupLeaderChores(mgr, s); err != nil {
		return err
	}
	if s.canaryServer != nil {
		// Every replica answers the egress-wait of the pods its Service sends it.
		if err := mgr.Add(s.canaryServer); err != nil {
			return err
		}
	}
	if webhooks != nil {
		// Every replica serves the webhooks, leader or not; policies are read live.
		if err := webhooks.SetupWithManager(mgr, mgr.GetAPIReader()); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "metrics", s.metricsAddr, "metricsSecure", s.metricsSecure, "probes", s.probeAddr,
		"leaderElect", s.leaderElect, "namespaces", s.namespaces, "gateHookPath", s.bootstrap.HookBin,
		"webhookPort", s.webhooks.Port, "webhookCerts", s.webhooks.Certs.Mode,
		"kubeAPIQPS", s.apiQPS, "policyWorkers", s.policyWorkers, "egressCanaryPort", s.canary.Port)
	return mgr.Start(ctx)
}

// reportsServed reports whether the API server serves OpenReports' Report
// (openreports.io/v1alpha1): the posture Reports are kept only then.
func reportsServed(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	resources, err := dc.ServerResourcesForGroupVersion(reportsv1alpha1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering whether the API server serves %s: %w", reportsv1alpha1.SchemeGroupVersion, err)
	}
	return slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Kind == "Report" }), nil
}

// setupReports registers the posture Reports' controller when the OpenReports CRD is served,
// and says so either way (the gate_posture_reports_enabled gauge, and the log): without the
// CRD the manager keeps no Report, and installing it later takes a restart of the manager.
func setupReports(mgr ctrl.Manager, s *settings, served bool) error {
	enabled := prometheus.NewGauge(prometheus.GaugeOpts{Name: "gate_posture_reports_enabled",
		Help: "1 when the manager keeps a posture Report (openreports.io/v1alpha1) per governed namespace; 0 when the API server does not serve the OpenReports CRD."})
	if err := metrics.Registry.Register(enabled); err != nil {
		// A manager run again in one process (the tests) finds its own gauge there.
		already := prometheus.AlreadyRegisteredError{}
		if !errors.As(err, &already) {
			return err
		}
		enabled = already.ExistingCollector.(prometheus.Gauge)
	}
	enabled.Set(0)
	if !served {
		ctrl.Log.Info("posture Reports are off: the API server does not serve openreports.io/v1alpha1 Report (install the OpenReports CRD, the chart's reports.installCRD, and restart the manager)")
		return nil
	}
	enabled.Set(1)
	return (&controllers.ReportReconciler{
		Client:          mgr.GetClient(),
		APIReader:       mgr.GetAPIReader(),
		RenderDigest:    webhook.RenderDigest(s.webhooks.InjectOptions()),
		ClusterPolicies: len(s.namespaces) == 0,
	}).SetupWithManager(mgr)
}

// setupLeaderChores registers the leader's work beside the controllers: the status metrics
// (the policies' readiness and the confirmers' replicas, from the cache) and the retention of
// finished ToolApprovals.
func setupLeaderChores(mgr ctrl.Manager, s *settings) error {
	if err := (&controllers.StatusMetrics{Reader: mgr.GetClient(), ClusterPolicies: len(s.namespaces) == 0, Registerer: metrics.Registry}).SetupWithManager(mgr); err != nil {
		return err
	}
	if s.toolApprovalRetention > 0 {
		return (&controllers.ToolApprovalRetention{Client: mgr.GetClient(), Retention: s.toolApprovalRetention}).SetupWithManager(mgr)
	}
	return nil
}

// setupClusterPolicies registers the controllers of cluster policies: their status, and the
// baseline of every namespace they select (the bundle and egress of the pods no namespace
// policy governs). A manager serving only some namespaces has no RBAC to read them, and says so.
func setupClusterPolicies(mgr ctrl.Manager, s *settings, resolver egress.Resolver) error {
	if len(s.namespaces) > 0 {
		ctrl.Log.Info("ClusterHarnessAgentPolicies are not read: the manager serves only some namespaces (--namespaces), and cluster policies need it to serve every namespace", "namespaces", s.namespaces)
		return nil
	}
	if err := (&controllers.ClusterHarnessAgentPolicyReconciler{
		Client:           mgr.GetClient(),
		Recorder:         mgr.GetEventRecorder("gate-operator"),
		ManagerNamespace: s.namespace,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&controllers.BaselineReconciler{
		Client:           mgr.GetClient(),
		Recorder:         mgr.GetEventRecorder("gate-operator"),
		Resolver:         resolver,
		DNS:              s.dns,
		Canary:           s.canary,
		ClusterCIDRs:     s.clusterCIDRs,
		Bootstrap:        s.bootstrap,
		MinResolve:       s.resolveMin,
		MaxResolve:       s.resolveMax,
		ManagerNamespace: s.namespace,

		MaxConcurrentReconciles: s.policyWorkers,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	// One pod webhook entry per cluster policy, so that every pod one selects is injected
	// and an outage refuses only those.
	if s.webhooks.Port != 0 {
		if err := (&controllers.ClusterPolicyWebhooksReconciler{
			Client:        mgr.GetClient(),
			Static:        s.webhooks.Certs.ConfigurationName,
			Configuration: s.webhooks.Certs.ConfigurationName + controllers.ClusterPolicyWebhooksSuffix,
		}).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	return nil
}
