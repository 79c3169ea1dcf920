// Package localenv runs gate-operator where users run it, for the demo and the e2e test: the
// local cluster with a real node (hack/local-cluster.sh start --node: containerd, kubelet,
// kube-proxy, kube-router, a DNS stand-in and the "outside" hosts), gate-operator installed
// by its own Helm chart from the images `make images` builds, the fake Managed Agents API in a
// pod, and sandbox pods from docs/examples. No local process stands in for a pod.
package localenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// The local node's fixed addresses (hack/lib/node.sh): every one of them lives on a bridge or
// in a network namespace the cluster script creates, inside 198.18.0.0/15.
const (
	// TestbedImage is the local test image: busybox, the fakes, the DNS stand-in and the probe.
	TestbedImage = "localhost/gate-operator-test/testbed:v1"
	// ConfirmerImage is the confirmer image `make images` builds (it carries gate-hook and
	// egress-wait for sandbox pods' init containers).
	ConfirmerImage = "ghcr.io/intutic/gate-confirmer:v0.1.0"
	// OperatorNamespace is where the chart is installed.
	OperatorNamespace = "gate-system"
	// ServiceCIDR and PodCIDR are the local cluster's ranges.
	ServiceCIDR = "198.18.16.0/24"
	PodCIDR     = "198.18.0.0/24"
	// KubernetesService is the kubernetes Service's ClusterIP and port.
	KubernetesService = "198.18.16.1:443"
	// ClusterDNS is the kube-dns Service's ClusterIP.
	ClusterDNS = "198.18.16.10"
)

// Env is a running local cluster with a node. Stop removes everything it started.
type Env struct {
	Root       string // repository root
	Dir        string // scratch state, removed by Stop
	Kubeconfig string
	Client     client.Client
	Out        io.Writer // progress lines

	// Chart is where the last InstallChart or UpgradeChart installed this tree's chart from.
	Chart ChartSource

	clusterEnv                 []string
	registryPort, registryAuth int
}

// Step prints a progress line.
func (e *Env) Step(format string, args ...any) {
	fmt.Fprintf(e.Out, "==> "+format+"\n", args...)
}

// Start builds what is missing (the first build of the node takes about 15 minutes on 2 cores)
// and starts the local cluster with its node. The cluster's state lives under a fresh
// directory; only one node can run on a machine at a time (its bridge and addresses are fixed).
func Start(ctx context.Context, root string, out io.Writer) (*Env, error) {
	dir, err := os.MkdirTemp("", "gate-operator-local-")
	if err != nil {
		return nil, err
	}
	e := &Env{Root: root, Dir: dir, Out: out}
	ok := false
	defer func() {
		if !ok {
			e.Stop()
		}
	}()
	etcd, err := freePort()
	if err != nil {
		return nil, err
	}
	api, err := freePort()
	if err != nil {
		return nil, err
	}
	if e.registryPort, err = freePort(); err != nil {
		return nil, err
	}
	if e.registryAuth, err = freePort(); err != nil {
		return nil, err
	}
	e.clusterEnv = []string{"LOCAL_CLUSTER_DIR=" + filepath.Join(dir, "cluster"), fmt.Sprintf("ETCD_PORT=%d", etcd), fmt.Sprintf("APISERVER_PORT=%d", api),
		fmt.Sprintf("REGISTRY_PORT=%d", e.registryPort), fmt.Sprintf("REGISTRY_AUTH_PORT=%d", e.registryAuth)}
	e.Step("starting the local cluster with a node (hack/local-cluster.sh start --node; builds what is missing)")
	if err := e.run(ctx, "hack/local-cluster.sh", "start", "--node"); err != nil {
		return nil, err
	}
	e.Kubeconfig = filepath.Join(dir, "cluster", "kubeconfig")
	// The demo and the e2e test print their own progress; the client's logs would be noise.
	ctrllog.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = gatev1.AddToScheme(scheme)
	_ = reportsv1alpha1.Install(scheme)
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}

// Stop stops the cluster and its node (hack/local-cluster.sh stop removes every process,
// mount, network namespace, rule and cgroup they created) and removes Dir.
func (e *Env) Stop() {
	if e.clusterEnv != nil {
		if err := e.run(context.Background(), "hack/local-cluster.sh", "stop"); err != nil {
			fmt.Fprintln(e.Out, "stopping the local cluster:", err)
		}
	}
	_ = os.RemoveAll(e.Dir)
}

// ClusterDir is the cluster script's state directory (PIDs, logs).
func (e *Env) ClusterDir() string { return filepath.Join(e.Dir, "cluster") }

func (e *Env) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = e.Root
	cmd.Env = append(os.Environ(), e.clusterEnv...)
	cmd.Stdout, cmd.Stderr = e.Out, e.Out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// Kubectl runs kubectl against the cluster with stdin and returns its standard output.
func (e *Env) Kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// thisChart are the values the local cluster gives this tree's chart besides the ranges: the
// OpenReports CRD, which no other release installs here, so the manager keeps posture Reports.
var thisChart = helmSet("reports.installCRD=true")

// InstallChart installs charts/gate-operator as a user would: pushed to the local registry as
// an OCI artifact and installed from there (helm install oci://... --version), into
// OperatorNamespace, its images by digest (the manager's through the pull secret), with the
// local cluster's ranges as the only other values (a user sets them for their own cluster)
// besides extra helm arguments; it waits until the manager is Available.
func (e *Env) InstallChart(ctx context.Context, extra ...string) error {
	return e.releaseThisChart(ctx, "install", extra)
}

// UpgradeChart upgrades the release to charts/gate-operator the same way, and waits until the
// manager is Available.
func (e *Env) UpgradeChart(ctx context.Context, extra ...string) error {
	return e.releaseThisChart(ctx, "upgrade", extra)
}

func (e *Env) releaseThisChart(ctx context.Context, verb string, extra []string) error {
	src, err := e.pushChart(ctx)
	if err != nil {
		return err
	}
	values, err := e.registryValues()
	if err != nil {
		return err
	}
	if err := e.ensurePullSecret(ctx); err != nil {
		return err
	}
	e.Chart = src
	e.Step("helm %s gate-operator from %s --version %s (chart %s), images by digest from the local registry", verb, src.Ref, src.Version, src.Digest)
	return e.helmRelease(ctx, verb, src.Ref, slices.Concat([]string{"--version", src.Version}, values, thisChart, extra)...)
}

// InstallChartFrom installs the release gate-operator from another tree's chart (a Release's)
// with the same ranges and extra helm arguments, and waits until the manager is Available.
func (e *Env) InstallChartFrom(ctx context.Context, chart string, extra ...string) error {
	return e.helmRelease(ctx, "install", chart, extra...)
}

// helmRelease runs helm install or upgrade of the release gate-operator from chart.
func (e *Env) helmRelease(ctx context.Context, verb, chart string, extra ...string) error {
	helm := filepath.Join(e.Root, "bin", "helm")
	args := append([]string{verb, "gate-operator", chart,
		"--kubeconfig", e.Kubeconfig, "--namespace", OperatorNamespace, "--create-namespace", "--wait", "--timeout", "3m",
		"--set-json", fmt.Sprintf(`manager.extraArgs=["--service-cidrs=%s","--pod-cidrs=%s"]`, ServiceCIDR, PodCIDR)}, extra...)
	cmd := exec.CommandContext(ctx, helm, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		logs, _ := e.Kubectl(ctx, "", "-n", OperatorNamespace, "logs", "deploy/gate-operator", "--tail=30")
		return fmt.Errorf("helm %s: %w\n%s\nmanager log:\n%s", verb, err, out.String(), logs)
	}
	return nil
}

// Wait polls cond every 200 ms until it is true, it errors, or timeout passes.
func Wait(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
