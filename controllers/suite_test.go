package controllers

// The controller tests run the reconciler in a manager against a real kube-apiserver
// (envtest), with an injected resolver. There is no kube-controller-manager here, so garbage
// collection is not exercised (the e2e does that); owner references are checked instead.

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/egress"
)

var (
	k8sClient client.Client
	// testConfig is the API server's admin config, for tests that impersonate another user.
	testConfig *rest.Config
	resolver   = &fakeResolver{records: map[string][]egress.Record{}}
)

const testConfirmerImage = "registry.example/gate-confirmer:test"

// testPlatformNamespace is the suite manager's one platform namespace: its SessionConfirmers
// may name policies in other namespaces.
const testPlatformNamespace = "gate-platform"

// testManagerNamespace is the suite manager's own namespace, which gets no baseline.
const testManagerNamespace = "gate-system"

// testCanary is the egress canary the baselines' NetworkPolicies allow (the namespace
// policies' in this suite allow none).
var testCanary = egress.Canary{Namespace: testManagerNamespace, Labels: map[string]string{"app.kubernetes.io/component": "manager"}, Port: 9444}

// testClusterCIDRs are kind's Service and Pod ranges, the baselines' cluster ranges.
var testClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("10.244.0.0/16")}

// testRetention is how long finished ToolApprovals are kept; the retention test dates its
// decisions around it.
const testRetention = time.Hour

// Short resolve bounds, so TTL requeues happen within a test.
const (
	testMinResolve = 2 * time.Second
	testMaxResolve = 4 * time.Second
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.Level(zapLevel()))))
	os.Exit(apiservertest.Main(envtest.WebhookInstallOptions{}, func(env *envtest.Environment) int { return runSuite(m, env.Config) }))
}

func runSuite(m *testing.M, cfg *rest.Config) int {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = gatev1.AddToScheme(scheme)
	_ = reportsv1alpha1.Install(scheme)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      cache.Options{ByObject: CacheByObject(true)},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&HarnessAgentPolicyReconciler{
		Client:          mgr.GetClient(),
		Recorder:        mgr.GetEventRecorder("gate-operator"),
		Resolver:        resolver,
		ClusterPolicies: true,
		MinResolve:      testMinResolve,
		MaxResolve:      testMaxResolve,
		// kind's Service and Pod ranges
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("10.244.0.0/16")},
	}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&GateExceptionReconciler{Client: mgr.GetClient(), ClusterPolicies: true}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&ClusterHarnessAgentPolicyReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("gate-operator"), ManagerNamespace: testManagerNamespace}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&BaselineReconciler{
		Client:           mgr.GetClient(),
		Recorder:         mgr.GetEventRecorder("gate-operator"),
		Resolver:         resolver,
		Canary:           testCanary,
		MinResolve:       testMinResolve,
		MaxResolve:       testMaxResolve,
		ManagerNamespace: testManagerNamespace,
		ClusterCIDRs:     testClusterCIDRs,
	}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&SessionConfirmerReconciler{
		Client:             mgr.GetClient(),
		APIReader:          mgr.GetAPIReader(),
		ConfirmerImage:     testConfirmerImage,
		PlatformNamespaces: []string{testPlatformNamespace},
	}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&ReportReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), HTTPClient: loopbackOnly(), RenderDigest: testRenderDigest, ClusterPolicies: true, Clock: testClock}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&ToolApprovalRetention{Client: mgr.GetClient(), Retention: testRetention}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "the manager stopped:", err)
		}
	}()
	// A direct client: tests read what the API server holds, not a cache.
	testConfig = cfg
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func zapLevel() int8 {
	if os.Getenv("TEST_VERBOSE_LOGS") != "" {
		return -1
	}
	return 2 // errors only
}

// fakeResolver answers from a table the tests set; unknown hosts do not resolve.
type fakeResolver struct {
	mu      sync.Mutex
	records map[string][]egress.Record
	calls   map[string]int
}

func (f *fakeResolver) set(host string, ttl time.Duration, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var recs []egress.Record
	for _, a := range addrs {
		recs = append(recs, egress.Record{Addr: netip.MustParseAddr(a), TTL: ttl})
	}
	f.records[host] = recs
}

func (f *fakeResolver) Resolve(_ context.Context, host string) ([]egress.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[host]++
	if recs, ok := f.records[host]; ok {
		return recs, nil
	}
	return nil, fmt.Errorf("%s: no such host", host)
}

func (f *fakeResolver) callCount(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[host]
}
