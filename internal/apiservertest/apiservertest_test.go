package apiservertest

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestMainWithoutAssets: with no kube-apiserver, a package's suite fails (exit 1) before any
// test runs and says how to build the control plane.
func TestMainWithoutAssets(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	var stderr bytes.Buffer
	ran := false
	code := mainTo(&stderr, envtest.WebhookInstallOptions{}, func(*envtest.Environment) int {
		ran = true
		return 0
	})
	if code != 1 || ran {
		t.Fatalf("exit code %d, tests ran %v; want 1 and no tests", code, ran)
	}
	if !strings.Contains(stderr.String(), "make envtest-assets") {
		t.Errorf("stderr %q does not say how to build the control plane", stderr.String())
	}
}

// TestMainServesTheSuite: the tests run against a served API server holding the project's CRDs,
// their exit code is the suite's, and the server is stopped once they return.
func TestMainServesTheSuite(t *testing.T) {
	if _, err := AssetsDir(); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	var clientset *kubernetes.Clientset
	code := mainTo(&stderr, envtest.WebhookInstallOptions{}, func(env *envtest.Environment) int {
		clientset = kubernetes.NewForConfigOrDie(env.Config)
		resources, err := clientset.Discovery().ServerResourcesForGroupVersion("gate.intutic.io/v1alpha1")
		if err != nil {
			t.Errorf("the project's CRDs are not served: %v", err)
			return 0
		}
		names := map[string]bool{}
		for _, r := range resources.APIResources {
			names[r.Name] = true
		}
		for _, want := range []string{"harnessagentpolicies", "sessionconfirmers", "toolapprovals"} {
			if !names[want] {
				t.Errorf("gate.intutic.io/v1alpha1 serves %v, not %s", names, want)
			}
		}
		return 7
	})
	if code != 7 {
		t.Fatalf("exit code %d, want the tests' 7; stderr:\n%s", code, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err == nil {
		t.Errorf("the API server still answers after the suite returned")
	}
}
