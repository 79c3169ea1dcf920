// Command bench-reconcile measures the HarnessAgentPolicy controller at scale on the local
// control plane (hack/bench-reconcile.sh starts it). Its defaults are issue 17's numbers:
// 10,000 policies of 10 rules in 100 namespaces, half denying all egress and half allowing
// CIDRs and hosts that a local DNS stand-in (hack/testbed dns) resolves. It reports
//
//  0. the API server's write rate now (-floor ConfigMap creates), since the machine may be
//     shared and the rate is the floor of everything below;
//  1. the time from the first create until every policy is Ready (watched, not polled), the
//     manager's API writes per second meanwhile, and the CPU seconds the manager, the API
//     server and etcd used in that time (where the time goes);
//  2. the manager's API write requests in the quiet period after convergence (target 0),
//     while the hosts are re-resolved at their TTL;
//  3. the manager's RSS and Go heap with the policies converged, and after a restart with M
//     unrelated ConfigMaps in the cluster versus none (target within 1.1x): the ConfigMap
//     cache is scoped to the operator's own. Memory is read after a forced GC, so the two
//     runs compare live memory, not the GC's timing;
//  4. a CPU profile of the manager over the convergence (-cpuprofile);
//  5. with -cluster-policy, issue 25's numbers: one ClusterHarnessAgentPolicy selecting every
//     namespace is created, then edited, and each time the time until every policy's bundle
//     carries it (status.clusterPolicies, then a new status.bootstrapHash), the manager's
//     writes and the CPU seconds of the manager, the API server and etcd; then the writes in
//     the quiet period after (target 0). Run it with -policies=1000 -namespaces=1000 for one
//     policy per namespace.
//
// Write requests are counted from the manager's own client metrics (rest_client_requests_total).
// Every number is printed with the load average, since the machine may be shared.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
	"github.com/intutic/gate-operator/internal/promscrape"
)

var (
	kubeconfig   = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the local control plane")
	managerBin   = flag.String("manager", "bin/manager", "manager binary")
	managerArgs  = flag.String("manager-args", "", "extra manager flags, space-separated (for example --policy-workers=8)")
	testbedBin   = flag.String("testbed", "bin/testbed", "hack/testbed binary, whose dns subcommand resolves the policies' hosts")
	dnsAddr      = flag.String("dns", "127.0.0.1:15353", "address the DNS stand-in serves on; the manager resolves through it (--nameserver)")
	policies     = flag.Int("policies", 10000, "policies to create")
	namespaces   = flag.Int("namespaces", 100, "namespaces to spread them over")
	rules        = flag.Int("rules", 10, "rules per policy")
	hostPool     = flag.Int("host-pool", 50, "distinct host names the allow-list policies draw from")
	hostsEach    = flag.Int("hosts", 2, "allowed hosts of each allow-list policy (the odd-numbered half)")
	writers      = flag.Int("writers", 16, "concurrent creates")
	floorCreates = flag.Int("floor", 3000, "ConfigMaps created (and deleted) first to measure the API server's write rate under the same load; 0 skips it")
	configMaps   = flag.Int("configmaps", 10000, "unrelated ConfigMaps for the RSS comparison; 0 skips it")
	quiet        = flag.Duration("quiet", 2*time.Minute, "quiet period after convergence in which writes are counted")
	metricsAddr  = flag.String("metrics", "127.0.0.1:18480", "metrics address of the manager")
	pprofAddr    = flag.String("pprof", "127.0.0.1:18481", "pprof address of the manager")
	cpuProfile   = flag.String("cpuprofile", "tmp/bench-reconcile-cpu.pprof", "where to write the manager's CPU profile taken from the first create; empty takes none")
	profileFor   = flag.Duration("profile-seconds", 60*time.Second, "length of the CPU profile")
	readyTimeout = flag.Duration("timeout", 10*time.Minute, "how long to wait for all policies to be Ready")
	clusterPol   = flag.Bool("cluster-policy", false, "after convergence, create and then edit one ClusterHarnessAgentPolicy selecting every namespace, and time both until every bundle carries it")
)

func main() {
	flag.Parse()
	log.SetLogger(logr.Discard()) // the watch's warnings are not measurements
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-reconcile:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side limit: the creates go as fast as the API server takes them
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = gatev1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}

	hosts := make([]string, *hostPool)
	records := make([]string, *hostPool)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("svc-%d.bench.test", i)
		records[i] = fmt.Sprintf("%s=192.0.2.%d", hosts[i], 1+i%250) // TEST-NET-1: public, not a cluster range
	}
	dns, err := startProcess("dns", *testbedBin, append([]string{"dns", "-listen", *dnsAddr}, records...)...)
	if err != nil {
		return err
	}
	defer dns.stop()

	floor := 0.0
	if *floorCreates > 0 {
		if floor, err = measureFloor(ctx, c); err != nil {
			return err
		}
	}
	ready, err := watchReady(ctx, cfg, scheme)
	if err != nil {
		return err
	}
	mgr, err := startManager()
	if err != nil {
		return err
	}
	defer func() { mgr.stop() }()

	if err := converge(ctx, c, ready, hosts, floor, mgr); err != nil {
		return err
	}
	if err := quietWrites(mgr, dns); err != nil {
		return err
	}
	fmt.Printf("manager with %d policies, after converging them: %s\n", *policies, mgr.memory())
	if *clusterPol {
		if err := clusterPolicyPhase(ctx, c, ready, mgr, dns); err != nil {
			return err
		}
	}
	if *configMaps == 0 {
		return nil
	}

	// The comparison restarts the manager both times, so both measure the same thing: a
	// manager that starts into a converged cluster.
	mgr.stop()
	rssNone, err := restartAndMeasure(&mgr)
	if err != nil {
		return err
	}
	mgr.stop()
	fmt.Printf("creating %d unrelated ConfigMaps\n", *configMaps)
	if err := createConfigMaps(ctx, c); err != nil {
		return err
	}
	rssMany, err := restartAndMeasure(&mgr)
	if err != nil {
		return err
	}
	fmt.Printf("manager after a restart, %d policies: with no other ConfigMaps %s; with %d unrelated ConfigMaps %s: RSS %.2fx, heap %.2fx; load average %s\n",
		*policies, rssNone, *configMaps, rssMany, float64(rssMany.rss)/float64(rssNone.rss), float64(rssMany.heap)/float64(rssNone.heap), loadavg())
	return nil
}

// converge creates the policies and waits until all are Ready, with a CPU profile of the
// manager from the first create.
func converge(ctx context.Context, c client.Client, ready *readyWatch, hosts []string, floor float64, mgr *manager) error {
	allowList := *policies / 2
	fmt.Printf("creating %d policies (%d rules each) in %d namespaces with %d writers: %d deny all egress, %d allow a CIDR and %d of %d hosts (DNS TTL 30 s)\n",
		*policies, *rules, *namespaces, *writers, *policies-allowList, allowList, *hostsEach, *hostPool)
	before, err := writeRequests()
	if err != nil {
		return err
	}
	if err := createNamespaces(ctx, c); err != nil {
		return err
	}
	cpuBefore := processCPU(mgr.cmd.Process.Pid)
	start := time.Now()
	profileDone := make(chan error, 1)
	go func() { profileDone <- profile(*cpuProfile, *profileFor) }()
	if err := createPolicies(ctx, c, hosts); err != nil {
		return err
	}
	created := time.Since(start)
	fmt.Printf("  creates took %.1f s (%.0f/s); load average %s\n", created.Seconds(), float64(*policies)/created.Seconds(), loadavg())
	if err := ready.wait(*policies, *readyTimeout); err != nil {
		return err
	}
	converged := time.Since(start)
	after, err := writeRequests()
	if err != nil {
		return err
	}
	w := after - before
	fmt.Printf("all %d policies Ready %.1f s after the first create; load average %s\n", *policies, converged.Seconds(), loadavg())
	fmt.Printf("  manager API writes until then: %d (%.2f per policy, %.0f/s over the %.1f s)\n",
		w, float64(w)/float64(*policies), float64(w)/converged.Seconds(), converged.Seconds())
	fmt.Printf("  CPU seconds meanwhile:")
	for _, name := range []string{"manager", "kube-apiserver", "etcd", "bench-reconcile"} {
		fmt.Printf(" %s %.1f", name, cpuBefore[name].after())
	}
	fmt.Printf(" (of %.0f on %d cores)\n", converged.Seconds()*float64(goruntime.NumCPU()), goruntime.NumCPU())
	if floor > 0 {
		fmt.Printf("  floor at the measured %.0f ConfigMap creates/s: these writes alone %.1f s, with the %d policy creates %.1f s\n",
			floor, float64(w)/floor, *policies, float64(w+*policies)/floor)
	}
	if err := <-profileDone; err != nil {
		fmt.Printf("  CPU profile: %v\n", err)
	} else if *cpuProfile != "" {
		fmt.Printf("  CPU profile of the manager's first %s: %s (go tool pprof -top %s)\n", *profileFor, *cpuProfile, *cpuProfile)
	}
	return nil
}

// quietWrites counts the manager's writes over the quiet period, once its work queue drained,
// and the CPU the manager and the DNS stand-in use meanwhile (the re-resolutions).
func quietWrites(mgr *manager, dns *process) error {
	if err := waitIdle(time.Minute); err != nil {
		return err
	}
	before, err := writeRequests()
	if err != nil {
		return err
	}
	fmt.Printf("counting the manager's API writes for %s (the hosts are re-resolved every 30 s meanwhile) ...\n", *quiet)
	mgrCPU, dnsCPU := cpuSeconds(mgr.cmd.Process.Pid), cpuSeconds(dns.cmd.Process.Pid)
	time.Sleep(*quiet)
	fmt.Printf("  CPU seconds meanwhile: manager %.1f, DNS stand-in %.1f\n", cpuSeconds(mgr.cmd.Process.Pid)-mgrCPU, cpuSeconds(dns.cmd.Process.Pid)-dnsCPU)
	after, err := writeRequests()
	if err != nil {
		return err
	}
	m, _ := scrape()
	fmt.Printf("API write requests in %s after convergence: %d (reconciles so far %.0f); load average %s\n",
		*quiet, after-before, reconciles(m), loadavg())
	return nil
}

// measureFloor creates ConfigMaps as fast as the API server takes them, with as many writers
// as the policy creates use, and deletes them again: the write rate the machine allows now.
func measureFloor(ctx context.Context, c client.Client) (float64, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "floor"}}
	if err := c.Create(ctx, ns); err != nil {
		return 0, err
	}
	payload := strings.Repeat("x", 1024)
	start := time.Now()
	err := parallel(*floorCreates, *writers, func(i int) error {
		return c.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "floor", Name: fmt.Sprintf("cm-%d", i)},
			Data:       map[string]string{"payload": payload},
		})
	})
	if err != nil {
		return 0, err
	}
	rate := float64(*floorCreates) / time.Since(start).Seconds()
	fmt.Printf("the API server's floor: %d ConfigMap creates with %d writers at %.0f/s; load average %s\n", *floorCreates, *writers, rate, loadavg())
	return rate, c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace("floor"))
}

// restartAndMeasure starts the manager, waits until it has reconciled every policy (with no
// write: the cluster is converged) and returns its RSS.
func restartAndMeasure(mgr **manager) (memory, error) {
	m, err := startManager()
	if err != nil {
		return memory{}, err
	}
	*mgr = m
	start := time.Now()
	if err := waitReconciled(*policies, 5*time.Minute); err != nil {
		return memory{}, err
	}
	if err := waitIdle(time.Minute); err != nil {
		return memory{}, err
	}
	w, _ := writeRequests()
	fmt.Printf("  restarted manager reconciled %d policies in %.1f s with %d API writes; load average %s\n", *policies, time.Since(start).Seconds(), w, loadavg())
	time.Sleep(5 * time.Second)
	return m.memory(), nil
}

func createNamespaces(ctx context.Context, c client.Client) error {
	for n := range *namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", n)}}
		if err := c.Create(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

func createPolicies(ctx context.Context, c client.Client, hosts []string) error {
	var gateRules []gatev1.Rule
	for _, r := range gatetest.RealisticRules(*rules) {
		gateRules = append(gateRules, gatev1.Rule{Name: r.Name, Tools: r.Tools, When: r.When, Action: gatev1.Action(r.Action), Reason: r.Reason, Code: r.Code})
	}
	return parallel(*policies, *writers, func(i int) error {
		p := &gatev1.HarnessAgentPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("bench-%d", i%*namespaces), Name: fmt.Sprintf("policy-%d", i)},
			Spec: gatev1.HarnessAgentPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{gatev1.LabelPolicy: fmt.Sprintf("policy-%d", i)}},
				Rules:       gateRules,
			},
		}
		if i%2 == 1 { // half deny all egress, half allow a CIDR and hosts
			p.Spec.Egress.AllowedCIDRs = []gatev1.CIDR{gatev1.CIDR(fmt.Sprintf("10.%d.0.0/16", i%250))}
			for h := range *hostsEach {
				p.Spec.Egress.AllowedHosts = append(p.Spec.Egress.AllowedHosts, gatev1.Hostname(hosts[(i+h*7)%len(hosts)]))
			}
		}
		return c.Create(ctx, p)
	})
}

// readyWatch counts the policies whose Ready condition is True for their generation, from a
// watch: polling lists of 10,000 policies would load the API server it measures.
type readyWatch struct {
	mu    sync.Mutex
	ready map[string]bool
	// hash and layers are each policy's status.bootstrapHash and status.clusterPolicies.
	hash, layers map[string]string
	changed      chan struct{}
}

func watchReady(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme) (*readyWatch, error) {
	c, err := cache.New(cfg, cache.Options{
		Scheme: scheme,
		// Only the status matters here.
		DefaultTransform: func(obj any) (any, error) {
			if p, ok := obj.(*gatev1.HarnessAgentPolicy); ok {
				p.ManagedFields, p.Spec = nil, gatev1.HarnessAgentPolicySpec{}
			}
			return obj, nil
		},
	})
	if err != nil {
		return nil, err
	}
	inf, err := c.GetInformer(ctx, &gatev1.HarnessAgentPolicy{})
	if err != nil {
		return nil, err
	}
	w := &readyWatch{ready: map[string]bool{}, hash: map[string]string{}, layers: map[string]string{}, changed: make(chan struct{}, 1)}
	set := func(obj any) {
		p, ok := obj.(*gatev1.HarnessAgentPolicy)
		if !ok {
			return
		}
		ok = meta.IsStatusConditionTrue(p.Status.Conditions, gatev1.ConditionReady) && p.Status.ObservedGeneration == p.Generation
		key := p.Namespace + "/" + p.Name
		w.mu.Lock()
		w.ready[key] = ok
		w.hash[key], w.layers[key] = p.Status.BootstrapHash, strings.Join(p.Status.ClusterPolicies, ",")
		w.mu.Unlock()
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
	}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("the policy watch did not sync")
	}
	return w, nil
}

func (w *readyWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, ok := range w.ready {
		if ok {
			n++
		}
	}
	return n
}

func (w *readyWatch) wait(n int, timeout time.Duration) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-w.changed:
			if w.count() >= n {
				return nil
			}
		case <-tick.C:
			fmt.Printf("  %d Ready; load average %s\n", w.count(), loadavg())
		case <-deadline:
			return fmt.Errorf("%d of %d policies Ready after %s", w.count(), n, timeout)
		}
	}
}

func createConfigMaps(ctx context.Context, c client.Client) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}}
	if err := c.Create(ctx, ns); err != nil {
		return err
	}
	payload := strings.Repeat("x", 1024)
	return parallel(*configMaps, *writers, func(i int) error {
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

type process struct {
	cmd *exec.Cmd
	log string
}

func startProcess(name, bin string, args ...string) (*process, error) {
	cmd := exec.Command(bin, args...)
	logPath := fmt.Sprintf("%s/bench-reconcile-%s.log", os.TempDir(), name)
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &process{cmd: cmd, log: logPath}, nil
}

func (p *process) stop() {
	if p.cmd.ProcessState != nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	_ = p.cmd.Wait()
}

type manager struct{ *process }

func startManager() (*manager, error) {
	// Plain HTTP metrics, scraped without a token: a local control plane, nothing to protect.
	args := []string{"--kubeconfig", *kubeconfig, "--metrics-bind-address", *metricsAddr, "--metrics-secure=false",
		"--health-probe-bind-address", "127.0.0.1:0", "--pprof-bind-address", *pprofAddr, "--nameserver", *dnsAddr}
	args = append(args, strings.Fields(*managerArgs)...)
	p, err := startProcess("manager", *managerBin, args...)
	if err != nil {
		return nil, err
	}
	m := &manager{p}
	for range 100 {
		if _, err := scrape(); err == nil {
			return m, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.stop()
	return nil, fmt.Errorf("the manager did not serve metrics; see %s", p.log)
}

// memory is the manager's RSS and its live Go heap: the heap allocated right after a forced
// garbage collection (through pprof), which does not depend on when the GC last ran. The
// re-resolutions allocate all the time, so RSS moves with the GC's timing by some 10%.
type memory struct{ rss, heap int64 }

func (m memory) String() string {
	return fmt.Sprintf("RSS %.1f MiB (live Go heap %.1f MiB)", mib(m.rss), mib(m.heap))
}

func (m *manager) memory() memory {
	var out memory
	if resp, err := http.Get("http://" + *pprofAddr + "/debug/pprof/heap?gc=1"); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if metrics, err := scrape(); err == nil {
			out.heap = int64(metrics["go_memstats_heap_alloc_bytes"])
		}
	}
	out.rss = m.rss()
	return out
}

// rss samples VmRSS every second for 10 s and returns the median, in bytes.
func (m *manager) rss() int64 {
	var samples []int64
	for range 10 {
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
		if err == nil {
			s := bufio.NewScanner(f)
			for s.Scan() {
				if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
					kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
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

// profile writes a CPU profile of the manager over d to path.
func profile(path string, d time.Duration) error {
	if path == "" {
		return nil
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", *pprofAddr, int(d.Seconds())))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func scrape() (map[string]float64, error) {
	return promscrape.Scrape("http://" + *metricsAddr + "/metrics")
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

// reconciles is how many reconciles of policies succeeded, with or without a requeue for the
// next resolution.
func reconciles(m map[string]float64) float64 {
	return m[`controller_runtime_reconcile_total{controller="harnessagentpolicy",result="success"}`] +
		m[`controller_runtime_reconcile_total{controller="harnessagentpolicy",result="requeue_after"}`]
}

// waitReconciled waits until the manager has reconciled at least n policies.
func waitReconciled(n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		m, err := scrape()
		if err == nil && reconciles(m) >= float64(n) {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("the manager did not reconcile %d policies within %s", n, timeout)
}

// waitIdle waits until the policy controller's work queue is empty (requeues for the next
// resolution wait outside it).
func waitIdle(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if depth, err := queueDepth(); err == nil && depth == 0 {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("the policy work queue did not drain within %s", timeout)
}

// queueDepth is the length of the policy controller's work queue, over its priorities.
func queueDepth() (float64, error) {
	m, err := scrape()
	if err != nil {
		return 0, err
	}
	depth, found := 0.0, false
	for k, v := range m {
		if strings.HasPrefix(k, "workqueue_depth{") && strings.Contains(k, `name="harnessagentpolicy"`) {
			depth, found = depth+v, true
		}
	}
	if !found {
		return 0, errors.New("no workqueue_depth for the policy controller")
	}
	return depth, nil
}

// cpuMark is a process's CPU time (user and system) at one moment.
type cpuMark struct {
	pid     int
	seconds float64
}

// processCPU marks the CPU time of the manager, the control plane ($LOCAL_CLUSTER_DIR/*.pid)
// and this process.
func processCPU(managerPID int) map[string]cpuMark {
	pids := map[string]int{"manager": managerPID, "bench-reconcile": os.Getpid()}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if b, err := os.ReadFile(fmt.Sprintf("%s/%s.pid", os.Getenv("LOCAL_CLUSTER_DIR"), name)); err == nil {
			pids[name], _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	out := map[string]cpuMark{}
	for name, pid := range pids {
		out[name] = cpuMark{pid: pid, seconds: cpuSeconds(pid)}
	}
	return out
}

// after is the CPU time the process used since the mark.
func (m cpuMark) after() float64 { return cpuSeconds(m.pid) - m.seconds }

// cpuSeconds reads utime and stime from /proc/PID/stat (USER_HZ is 100 on Linux).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from the 3rd on
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// clusterPolicyPhase creates one cluster policy selecting every namespace and waits until every
// policy's bundle carries it, then edits its rules and waits until every bundle changed; each
// with the manager's writes and the CPU it, the API server and etcd used; then the quiet writes.
func clusterPolicyPhase(ctx context.Context, c client.Client, ready *readyWatch, mgr *manager, dns *process) error {
	var gateRules []gatev1.Rule
	for _, r := range gatetest.RealisticRules(*rules) {
		gateRules = append(gateRules, gatev1.Rule{Name: r.Name, Tools: r.Tools, When: r.When, Action: gatev1.Action(r.Action), Reason: r.Reason, Code: r.Code})
	}
	cp := &gatev1.ClusterHarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-baseline"},
		Spec:       gatev1.ClusterHarnessAgentPolicySpec{Rules: gateRules},
	}
	step := func(what string, act func() error, done func(key string) bool) error {
		before, err := writeRequests()
		if err != nil {
			return err
		}
		cpu := processCPU(mgr.cmd.Process.Pid)
		start := time.Now()
		if err := act(); err != nil {
			return err
		}
		if err := ready.waitAll(done, *readyTimeout); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		took := time.Since(start)
		after, err := writeRequests()
		if err != nil {
			return err
		}
		fmt.Printf("%s: every one of the %d bundles carries it %.1f s after the write, with %d manager API writes; load average %s\n", what, *policies, took.Seconds(), after-before, loadavg())
		fmt.Printf("  CPU seconds meanwhile:")
		for _, name := range []string{"manager", "kube-apiserver", "etcd"} {
			fmt.Printf(" %s %.1f", name, cpu[name].after())
		}
		fmt.Printf(" (of %.0f on %d cores)\n", took.Seconds()*float64(goruntime.NumCPU()), goruntime.NumCPU())
		return nil
	}
	if err := step(fmt.Sprintf("a cluster policy of %d rules created over %d namespaces", *rules, *namespaces),
		func() error { return c.Create(ctx, cp) },
		func(key string) bool { return ready.layers[key] == cp.Name }); err != nil {
		return err
	}
	hashes := ready.snapshotHashes()
	if err := step("its first rule edited",
		func() error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error { // the controller writes its status
				if err := c.Get(ctx, client.ObjectKeyFromObject(cp), cp); err != nil {
					return err
				}
				cp.Spec.Rules[0].When = "(" + gateRules[0].When + ") || input.command == \"bench-edit\""
				return c.Update(ctx, cp)
			})
		},
		func(key string) bool { return ready.hash[key] != hashes[key] && ready.hash[key] != "" }); err != nil {
		return err
	}
	return quietWrites(mgr, dns)
}

// snapshotHashes copies each policy's bootstrap hash.
func (w *readyWatch) snapshotHashes() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]string, len(w.hash))
	for k, v := range w.hash {
		out[k] = v
	}
	return out
}

// waitAll waits until done, which is called with the lock held, holds for every policy.
func (w *readyWatch) waitAll(done func(key string) bool, timeout time.Duration) error {
	count := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		n := 0
		for key := range w.ready {
			if done(key) {
				n++
			}
		}
		return n
	}
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-w.changed:
			if count() >= *policies {
				return nil
			}
		case <-tick.C:
			fmt.Printf("  %d of %d; load average %s\n", count(), *policies, loadavg())
		case <-deadline:
			return fmt.Errorf("%d of %d after %s", count(), *policies, timeout)
		}
	}
}
