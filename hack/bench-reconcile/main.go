// Command bench-reconcile measures the HarnessAgentPolicy controller at scale on the local
// control plane (hack/bench-reconcile.sh starts it):
//
//  1. the time until N policies are all Ready;
//  2. the manager's API write requests in the quiet period after convergence (target 0);
//  3. the manager's RSS with M unrelated ConfigMaps in the cluster versus none (target within
//     1.5x), which shows that the ConfigMap cache is scoped to the operator's own.
//
// Write requests are counted from the manager's own client metrics (rest_client_requests_total).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

var (
	kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the local control plane")
	managerBin = flag.String("manager", "bin/manager", "manager binary")
	policies   = flag.Int("policies", 500, "policies to create")
	namespaces = flag.Int("namespaces", 10, "namespaces to spread them over")
	rules      = flag.Int("rules", 10, "rules per policy")
	configMaps = flag.Int("configmaps", 10000, "unrelated ConfigMaps for the RSS comparison")
	quiet      = flag.Duration("quiet", 2*time.Minute, "quiet period after convergence in which writes are counted")
	metrics    = flag.String("metrics", "127.0.0.1:18480", "metrics address of the manager")
	resolvConf = flag.String("resolv-conf", "", "resolv.conf for the manager (the policies here allow CIDRs only)")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-reconcile:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = gatev1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}

	mgr, err := startManager()
	if err != nil {
		return err
	}
	defer mgr.stop()

	fmt.Printf("creating %d policies (%d rules each) in %d namespaces\n", *policies, *rules, *namespaces)
	start := time.Now()
	if err := createPolicies(ctx, c); err != nil {
		return err
	}
	created := time.Since(start)
	if err := waitAllReady(ctx, c, 10*time.Minute); err != nil {
		return err
	}
	converged := time.Since(start)
	fmt.Printf("all %d policies Ready %.1f s after the first create (creates took %.1f s)\n", *policies, converged.Seconds(), created.Seconds())

	// Let the work queue drain, then count writes over the quiet period.
	time.Sleep(5 * time.Second)
	before, err := writeRequests()
	if err != nil {
		return err
	}
	fmt.Printf("counting the manager's API writes for %s ...\n", *quiet)
	time.Sleep(*quiet)
	after, err := writeRequests()
	if err != nil {
		return err
	}
	fmt.Printf("API write requests in %s after convergence: %d\n", *quiet, after-before)
	rssNone := mgr.rss()
	mgr.stop()

	fmt.Printf("creating %d unrelated ConfigMaps\n", *configMaps)
	if err := createConfigMaps(ctx, c); err != nil {
		return err
	}
	mgr, err = startManager()
	if err != nil {
		return err
	}
	defer mgr.stop()
	if err := waitReconciled(*policies, 5*time.Minute); err != nil {
		return err
	}
	time.Sleep(5 * time.Second)
	rssMany := mgr.rss()
	fmt.Printf("manager RSS, %d policies: %.1f MiB with no other ConfigMaps, %.1f MiB with %d unrelated ConfigMaps (%.2fx)\n",
		*policies, mib(rssNone), mib(rssMany), *configMaps, float64(rssMany)/float64(rssNone))
	return nil
}

func createPolicies(ctx context.Context, c client.Client) error {
	var gateRules []gatev1.Rule
	for _, r := range gatetest.RealisticRules(*rules) {
		gateRules = append(gateRules, gatev1.Rule{Name: r.Name, Tools: r.Tools, When: r.When, Action: gatev1.Action(r.Action), Reason: r.Reason, Code: r.Code})
	}
	for n := range *namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", n)}}
		if err := c.Create(ctx, ns); err != nil {
			return err
		}
	}
	return parallel(*policies, 8, func(i int) error {
		p := &gatev1.HarnessAgentPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("bench-%d", i%*namespaces), Name: fmt.Sprintf("policy-%d", i)},
			Spec: gatev1.HarnessAgentPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{gatev1.LabelPolicy: fmt.Sprintf("policy-%d", i)}},
				Rules:       gateRules,
			},
		}
		if i%2 == 1 { // half deny all egress, half allow a CIDR
			p.Spec.Egress.AllowedCIDRs = []gatev1.CIDR{gatev1.CIDR(fmt.Sprintf("10.%d.0.0/16", i%250))}
		}
		return c.Create(ctx, p)
	})
}

func waitAllReady(ctx context.Context, c client.Client, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var list gatev1.HarnessAgentPolicyList
		if err := c.List(ctx, &list); err != nil {
			return err
		}
		ready := 0
		for _, p := range list.Items {
			if meta.IsStatusConditionTrue(p.Status.Conditions, gatev1.ConditionReady) && p.Status.ObservedGeneration == p.Generation {
				ready++
			}
		}
		if ready == *policies {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("not all policies Ready within %s", timeout)
}

func createConfigMaps(ctx context.Context, c client.Client) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}}
	if err := c.Create(ctx, ns); err != nil {
		return err
	}
	payload := strings.Repeat("x", 1024)
	return parallel(*configMaps, 16, func(i int) error {
		return c.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "unrelated", Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{"app": "unrelated"}},
			Data:       map[string]string{"payload": payload},
		})
	})
}

func parallel(n, workers int, f func(int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
loop:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break loop
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

type manager struct {
	cmd *exec.Cmd
}

func startManager() (*manager, error) {
	// Plain HTTP metrics, scraped without a token: a local control plane, nothing to protect.
	args := []string{"--kubeconfig", *kubeconfig, "--metrics-bind-address", *metrics, "--metrics-secure=false", "--health-probe-bind-address", "127.0.0.1:0"}
	if *resolvConf != "" {
		args = append(args, "--resolv-conf", *resolvConf)
	}
	cmd := exec.Command(*managerBin, args...)
	log, err := os.Create(os.TempDir() + "/bench-reconcile-manager.log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	m := &manager{cmd: cmd}
	for range 100 {
		if _, err := scrape(); err == nil {
			return m, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.stop()
	return nil, fmt.Errorf("the manager did not serve metrics; see %s", log.Name())
}

func (m *manager) stop() {
	if m.cmd.ProcessState != nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Signal(os.Interrupt)
	_ = m.cmd.Wait()
}

// rss samples VmRSS every second for 10 s and returns the median, in bytes.
func (m *manager) rss() int64 {
	var samples []int64
	for range 10 {
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
		if err == nil {
			s := bufio.NewScanner(f)
			for s.Scan() {
				if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
					kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
					samples = append(samples, kb*1024)
				}
			}
			f.Close()
		}
		time.Sleep(time.Second)
	}
	slices.Sort(samples)
	if len(samples) == 0 {
		return 0
	}
	return samples[len(samples)/2]
}

func scrape() (map[string]float64, error) {
	resp, err := http.Get("http://" + *metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out, s.Err()
}

// writeRequests sums the manager's POST, PUT, PATCH and DELETE requests to the API server.
func writeRequests() (int, error) {
	m, err := scrape()
	if err != nil {
		return 0, err
	}
	total := 0.0
	for k, v := range m {
		if !strings.HasPrefix(k, "rest_client_requests_total{") {
			continue
		}
		for _, verb := range []string{`method="POST"`, `method="PUT"`, `method="PATCH"`, `method="DELETE"`} {
			if strings.Contains(k, verb) {
				total += v
			}
		}
	}
	return int(total), nil
}

// waitReconciled waits until the manager has reconciled at least n policies.
func waitReconciled(n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		m, err := scrape()
		if err == nil && m[`controller_runtime_reconcile_total{controller="harnessagentpolicy",result="success"}`] >= float64(n) {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("the manager did not reconcile %d policies within %s", n, timeout)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
