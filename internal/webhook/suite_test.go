package webhook

// The webhook tests run the three webhooks in a manager, served over TLS on a random port,
// behind the configurations of config/webhook/webhooks.yaml registered with a real
// kube-apiserver (envtest's WebhookInstallOptions point them at the local server and give them
// a CA): every admission below is the API server calling the webhook. There is no kubelet and
// no controller here, so pods are created and never run.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/testutil"
	"github.com/intutic/gate-operator/internal/webhook/webhooktest"
)

// testGateHookImage is the image the examples name, so an injected pod can equal them.
const testGateHookImage = "ghcr.io/intutic/gate-confirmer:v0.1.0"

// testPlatformNamespace is the suite's one platform namespace.
const testPlatformNamespace = "gate-platform"

var (
	// testConfig is the API server's admin config.
	testConfig *rest.Config
	// k8sClient talks to the API server directly; warnings collects what it is warned.
	k8sClient client.Client
	warnings  = &testutil.Warnings{}
	scheme    = runtime.NewScheme()
	repoRoot  string
	// canaryIP is the ClusterIP of the egress canary Service the suite creates (the default
	// install's, DefaultEgressCanary), which the pod webhook writes into egress-wait.
	canaryIP string
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.Level(zapLevel()))))
	_ = clientgoscheme.AddToScheme(scheme)
	_ = gatev1.AddToScheme(scheme)
	var err error
	if repoRoot, err = apiservertest.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	validating, mutating, err := webhooktest.Configurations(filepath.Join(repoRoot, "config", "webhook", "webhooks.yaml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	webhooks := envtest.WebhookInstallOptions{ValidatingWebhooks: validating, MutatingWebhooks: mutating}
	return apiservertest.Main(webhooks, func(env *envtest.Environment) int { return runWithAPIServer(m, env) })
}

func runWithAPIServer(m *testing.M, env *envtest.Environment) int {
	cfg := env.Config
	wo := env.WebhookInstallOptions
	srv := NewServer(Options{
		Host:          wo.LocalServingHost,
		Port:          wo.LocalServingPort,
		Certs:         CertOptions{Mode: CertsExternal, Dir: wo.LocalServingCertDir},
		GateHookImage: testGateHookImage,
		// The SessionConfirmers of this namespace may name policies of other namespaces.
		PlatformNamespaces: []string{testPlatformNamespace},
	})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          srv,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := srv.SetupWithManager(mgr, mgr.GetAPIReader()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() {
		done <- mgr.Start(ctx)
		close(stopped)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "the manager stopped:", err)
		}
	}()

	// The policy webhooks fail open (failurePolicy Ignore): no test may run before they serve.
	if err := waitServing(ctx, srv, stopped); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testConfig = rest.CopyConfig(cfg)
	testConfig.WarningHandlerWithContext = warnings
	if k8sClient, err = client.New(testConfig, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if canaryIP, err = createCanaryService(ctx, k8sClient); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := apiservertest.InstallAdmissionPolicies(ctx, k8sClient); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

var admissionPoliciesOnce sync.Once

// admissionPoliciesEnforced waits, once per run, until the API server refuses a dry-run pod
// the admission policies refuse (a governed pod with hostPID).
func admissionPoliciesEnforced(t *testing.T) {
	t.Helper()
	admissionPoliciesOnce.Do(func() {
		ns := governedNamespace(t, "vap-probe-")
		probe := examplePod(t, "sandbox-pod-labelled.yaml", ns)
		probe.Spec.HostPID = true
		testutil.Eventually(t, time.Minute, func() error {
			err := k8sClient.Create(t.Context(), probe.DeepCopy(), client.DryRunAll)
			if err != nil && strings.Contains(err.Error(), "spec.hostPID") {
				return nil
			}
			return fmt.Errorf("the admission policies of config/admission-policies are not enforced yet (the probe pod: %v)", err)
		})
	})
}

// createCanaryService creates the default install's egress canary Service, whose ClusterIP
// the pod webhook reads at every admission, and returns that address.
func createCanaryService(ctx context.Context, c client.Client) (string, error) {
	d := DefaultEgressCanary
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Service}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app.kubernetes.io/name": "gate-operator"},
		Ports: []corev1.ServicePort{
			{Name: "canary-control", Port: d.ControlPort, TargetPort: intstr.FromString("canary-control")},
			{Name: "canary-denied", Port: d.DeniedPort, TargetPort: intstr.FromString("canary-denied")},
		},
	}}
	if err := c.Create(ctx, svc); err != nil {
		return "", fmt.Errorf("creating the egress canary Service: %w", err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", fmt.Errorf("the egress canary Service was given ClusterIP %q", svc.Spec.ClusterIP)
	}
	return svc.Spec.ClusterIP, nil
}

// waitServing waits until the webhook server answers TLS, or the manager stops.
func waitServing(ctx context.Context, srv *Server, stopped <-chan struct{}) error {
	check := srv.StartedChecker()
	deadline := time.After(time.Minute)
	for check(nil) != nil {
		select {
		case <-stopped:
			return errors.New("the manager stopped before the webhooks served")
		case <-deadline:
			return fmt.Errorf("the webhooks do not serve: %v", check(nil))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

func zapLevel() int8 {
	if os.Getenv("TEST_VERBOSE_LOGS") != "" {
		return -1
	}
	return 2 // errors only
}
