package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/egress"
)

// The paths the webhooks are served at; config/webhook and the chart's webhook configurations
// name the same (a test holds them together).
const (
	PolicyPath = "/validate-harnessagentpolicy"
	// ClusterPolicyPath validates ClusterHarnessAgentPolicies.
	ClusterPolicyPath = "/validate-clusterharnessagentpolicy"
	ConfirmerPath     = "/validate-sessionconfirmer"
	PodPath           = "/mutate-pod"
	// PodValidatorPath judges a labelled pod's final spec against the injection (PodValidator).
	PodValidatorPath = "/validate-pod"
	// ExceptionRecorderPath records who wrote a GateException (ExceptionRecorder).
	ExceptionRecorderPath = "/mutate-gateexception"
	// ExceptionValidatorPath admits a GateException its requester may make (ExceptionValidator).
	ExceptionValidatorPath = "/validate-gateexception"
	// NetworkPolicyPath refuses a NetworkPolicy that would widen egress beyond a cluster
	// policy's ceiling (NetworkPolicyValidator).
	NetworkPolicyPath = "/validate-networkpolicy"
)

// Options configure the manager's webhooks.
type Options struct {
	// Port the webhook server listens on (HTTPS).
	Port int
	// Host it binds, "" for every address.
	Host string
	// Certs says where the serving certificate comes from.
	Certs CertOptions
	// Bootstrap are the manager's bundle options: the policy webhook judges bundles as the
	// controller renders them, and the pod webhook mounts them where they say.
	Bootstrap bootstrap.Options
	// GateHookImage is the image the injected install-gate-hook init container runs.
	GateHookImage string
	// EgressCanary is where the injected egress-wait reaches the manager's egress canary: the
	// pod webhook reads its Service's ClusterIP (PodInjector).
	EgressCanary EgressCanary
	// PlatformNamespaces are the namespaces whose SessionConfirmers may name a policy in
	// another namespace; the SessionConfirmer webhook refuses that anywhere else.
	PlatformNamespaces []string
	// Namespaces are the namespaces the manager serves; empty is every namespace. A manager
	// serving only some reads no cluster policies, so the NetworkPolicy webhook has no egress
	// ceiling to judge by.
	Namespaces []string
	// DNS selects the cluster DNS pods, as the controller's egress NetworkPolicies do: the
	// NetworkPolicy webhook lets a rule open them on port 53 under any ceiling. The zero value
	// is egress.DefaultDNSSelector.
	DNS egress.DNSSelector
	// ShutdownDelay is how long the server keeps answering once the manager stops (a rollout or
	// an eviction deletes its pod), while the Service's endpoints drop the pod: every answer then
	// closes its connection, so the API server's kept-alive connections move to the replicas that
	// stay, and /readyz fails. Zero stops at once; it must end within the pod's
	// terminationGracePeriodSeconds.
	ShutdownDelay time.Duration
	// Registerer serves the serving certificate's expiry
	// (gate_operator_webhook_certificate_expiration_timestamp_seconds) while the manager runs:
	// the manager passes controller-runtime's registry; nil serves it nowhere.
	Registerer prometheus.Registerer
}

// Server is the manager's webhook server: controller-runtime's, started only once its serving
// certificate is in place (until then /readyz fails, so no admission request reaches a replica
// that cannot answer it). Every replica serves, leader or not. When the manager stops, it drains
// for Options.ShutdownDelay before it closes its listener.
type Server struct {
	ctrlwebhook.Server
	opts     Options
	ready    chan struct{}
	draining atomic.Bool
}

// NewServer returns the server to pass as ctrl.Options.WebhookServer; SetupWithManager then
// wires the certificates and the handlers.
func NewServer(o Options) *Server {
	return &Server{
		Server: ctrlwebhook.NewServer(ctrlwebhook.Options{
			Host:    o.Host,
			Port:    o.Port,
			CertDir: o.Certs.Dir,
			// HTTP/1.1 only, as for the metrics endpoint: the API server is the only client, and
			// HTTP/2's stream resets (CVE-2023-44487, CVE-2023-39325) need not be reachable.
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
		}),
		opts:  o,
		ready: make(chan struct{}),
	}
}

// Start serves once the certificate is in place, until ShutdownDelay after ctx ends; it
// implements manager.Runnable. The manager stops its webhook server after its controllers and
// caches, and the delay comes on top: no webhook reads through the cache (policies and the
// canary Service come from the API reader, the reviews are created), so they answer meanwhile.
func (s *Server) Start(ctx context.Context) error {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil
	}
	serve, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
		case <-serve.Done():
			return
		}
		s.draining.Store(true)
		logf.FromContext(ctx).WithName("webhook").Info("draining the webhook server before it stops", "delay", s.opts.ShutdownDelay)
		t := time.NewTimer(s.opts.ShutdownDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-serve.Done():
		}
		stop()
	}()
	return s.Server.Start(serve)
}

// Register serves hook at path; while the server drains, each answer closes its connection.
func (s *Server) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		hook.ServeHTTP(w, r)
	}))
}

// InjectOptions are the options the pod webhook injects with (before the canary's address is
// resolved at each admission).
func (o Options) InjectOptions() InjectOptions {
	return InjectOptions{Bootstrap: o.Bootstrap, GateHookImage: o.GateHookImage, EgressCanary: o.EgressCanary}
}

// SetupWithManager manages the serving certificate (the rotator, or a wait for the files another
// issuer writes) and serves its expiry as a metric, registers the webhooks with reader for the policies they look up (the
// manager's API reader: never a cache), and adds the server's readiness to /readyz.
func (s *Server) SetupWithManager(mgr manager.Manager, reader client.Reader) error {
	// The manager starts its webhook server once asked for it, and this must be that server.
	if mgr.GetWebhookServer() != ctrlwebhook.Server(s) {
		return errors.New("the webhook server is not the manager's: pass it as ctrl.Options.WebhookServer")
	}
	switch s.opts.Certs.Mode {
	case CertsSelf:
		if err := addRotator(mgr, s.opts.Certs, s.ready); err != nil {
			return err
		}
	case CertsExternal:
		if err := mgr.Add(everyReplica(func(ctx context.Context) error {
			return waitForFiles(ctx, s.opts.Certs.Dir, s.ready)
		})); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown certificate mode %q", s.opts.Certs.Mode)
	}
	if s.opts.Registerer != nil {
		if err := mgr.Add(&certMetrics{dir: s.opts.Certs.Dir, reg: s.opts.Registerer}); err != nil {
			return err
		}
	}
	s.Register(PolicyPath, &admission.Webhook{Handler: &PolicyValidator{Bootstrap: s.opts.Bootstrap}})
	s.Register(ClusterPolicyPath, &admission.Webhook{Handler: &ClusterPolicyValidator{}})
	s.Register(ConfirmerPath, &admission.Webhook{Handler: &ConfirmerValidator{Reader: reader, PlatformNamespaces: s.opts.PlatformNamespaces}})
	injector := &PodInjector{Reader: reader, Options: s.opts.InjectOptions(), ClusterPolicies: len(s.opts.Namespaces) == 0}
	s.Register(PodPath, &admission.Webhook{Handler: injector})
	s.Register(PodValidatorPath, &admission.Webhook{Handler: &PodValidator{Injector: injector}})
	s.Register(ApprovalRecorderPath, &admission.Webhook{Handler: &ApprovalRecorder{}})
	s.Register(ExceptionRecorderPath, &admission.Webhook{Handler: &ExceptionRecorder{}})
	s.Register(ExceptionValidatorPath, &admission.Webhook{Handler: &ExceptionValidator{Reader: reader, Reviews: mgr.GetClient()}})
	s.Register(ApprovalValidatorPath, &admission.Webhook{Handler: &ApprovalValidator{Reviews: mgr.GetClient()}})
	s.Register(NetworkPolicyPath, &admission.Webhook{Handler: &NetworkPolicyValidator{
		Reader: reader, DNS: s.opts.DNS, ClusterPolicies: len(s.opts.Namespaces) == 0,
	}})
	return mgr.AddReadyzCheck("webhook", s.readyChecker())
}

// readyChecker is /readyz's webhook check: the server answers TLS with its certificate, and
// does not drain.
func (s *Server) readyChecker() healthz.Checker {
	started := s.StartedChecker()
	return func(r *http.Request) error {
		if s.draining.Load() {
			return errors.New("the webhook server is draining before it stops")
		}
		return started(r)
	}
}

// waitForFiles closes ready once dir holds tls.crt and tls.key (written by cert-manager, say),
// checking every second; a mounted Secret is usually there at once.
func waitForFiles(ctx context.Context, dir string, ready chan struct{}) error {
	log := logf.FromContext(ctx).WithName("webhook-certs")
	for logged := false; ; {
		if filesExist(dir, "tls.crt", "tls.key") {
			close(ready)
			return nil
		}
		if !logged {
			log.Info("waiting for the webhook serving certificate", "dir", dir)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func filesExist(dir string, names ...string) bool {
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			return false
		}
	}
	return true
}

// everyReplica is a runnable that runs on every replica, not only the leader.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }
