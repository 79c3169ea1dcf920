package install_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/testutil"
)

var (
	envOnce       sync.Once
	env           *envtest.Environment
	envClient     client.Client
	envKubeconfig string // a kubeconfig file for envtest, for helm
	envErr        error
	warnings      = &testutil.Warnings{}
)

// apiServer starts envtest once (no CRDs: the manifests under test bring their own).
func apiServer(t *testing.T) client.Client {
	t.Helper()
	envOnce.Do(func() {
		e, err := apiservertest.Environment(false)
		if err != nil {
			envErr = err
			return
		}
		cfg, err := e.Start()
		if err != nil {
			envErr = fmt.Errorf("starting envtest: %w", err)
			return
		}
		env = e
		dir, err := os.MkdirTemp("", "install-test-")
		if err != nil {
			envErr = err
			return
		}
		envKubeconfig = filepath.Join(dir, "kubeconfig")
		if envErr = os.WriteFile(envKubeconfig, e.KubeConfig, 0o600); envErr != nil {
			return
		}
		cfg.WarningHandlerWithContext = warnings
		envClient, envErr = client.New(cfg, client.Options{})
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return envClient
}
