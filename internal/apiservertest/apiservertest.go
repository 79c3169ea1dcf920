// Package apiservertest starts a real kube-apiserver (envtest) from the binaries that
// hack/build-control-plane.sh builds, for the tests of every package that needs one: Start for
// one test, Main for all the tests of a package.
package apiservertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubernetesVersion is the control plane the tests run against.
const KubernetesVersion = "v1.37.2"

// RepoRoot is the repository root: the nearest folder above the working directory with go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// AssetsDir is $KUBEBUILDER_ASSETS, else bin/k8s/<version> under the repository root. It
// must hold kube-apiserver and etcd; the error says how to build them.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin", "k8s", KubernetesVersion)
	}
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		return "", fmt.Errorf("no kube-apiserver in %s: run `make envtest-assets` (or `make test`, which builds it)", dir)
	}
	return dir, nil
}

// OpenReportsModule is the module whose CRD the posture Reports need (openreports.io Report), at
// the version go.mod pins.
const OpenReportsModule = "github.com/openreports/reports-api"

// OpenReportsCRDs is the directory of the OpenReports CRDs, as the pinned module publishes
// them, in the module cache (`go mod download` fetches it if missing).
func OpenReportsCRDs(root string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", OpenReportsModule)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("downloading %s: %w", OpenReportsModule, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("%s is not in the module cache: %q", OpenReportsModule, out)
	}
	return filepath.Join(mod.Dir, "config", "crd"), nil
}

// Environment returns an envtest environment on the local binaries, with the project's CRDs
// and OpenReports' installed when withCRDs is set.
func Environment(withCRDs bool) (*envtest.Environment, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	if withCRDs {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		reports, err := OpenReportsCRDs(root)
		if err != nil {
			return nil, err
		}
		env.CRDDirectoryPaths = []string{filepath.Join(root, "config", "crd", "bases"), reports}
		env.ErrorIfCRDPathMissing = true
	}
	return env, nil
}

// Start starts an API server for one test and stops it when the test ends.
func Start(t testing.TB, withCRDs bool) *rest.Config {
	t.Helper()
	_, cfg := start(t, withCRDs)
	return cfg
}

// StartAdmin is Start with a user of group system:masters named user added, for processes the
// test runs: it returns the admin config and that user's kubeconfig.
func StartAdmin(t testing.TB, withCRDs bool, user string) (*rest.Config, []byte) {
	t.Helper()
	env, cfg := start(t, withCRDs)
	admin, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg, kubeconfig
}

// start starts an API server for the test's duration.
func start(t testing.TB, withCRDs bool) (*envtest.Environment, *rest.Config) {
	t.Helper()
	env, err := Environment(withCRDs)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	return env, cfg
}

// Main starts one API server, with the project's CRDs and the given webhook configurations, for
// all the tests of a package, calls run with it and stops it when run returns; a TestMain is
// os.Exit(apiservertest.Main(webhooks, run)). It returns run's exit code, or 1 with the reason
// on stderr when the server does not start.
func Main(webhooks envtest.WebhookInstallOptions, run func(env *envtest.Environment) int) int {
	return mainTo(os.Stderr, webhooks, run)
}

func mainTo(stderr io.Writer, webhooks envtest.WebhookInstallOptions, run func(env *envtest.Environment) int) int {
	env, err := Environment(true)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, err)
		return 1
	}
	env.WebhookInstallOptions = webhooks
	if _, err := env.Start(); err != nil {
		_, _ = fmt.Fprintln(stderr, "starting envtest:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			_, _ = fmt.Fprintln(stderr, "stopping envtest:", err)
		}
	}()
	return run(env)
}
