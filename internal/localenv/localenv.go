// Package localenv runs gate-operator on the local control plane for the demo and the e2e
// test: etcd, kube-apiserver and kube-controller-manager (hack/local-cluster.sh), the CRDs,
// the manager as a process, a DNS stand-in for the allowed hosts, and the confirmer as a
// local process configured from the Deployment the SessionConfirmer controller wrote (the
// local control plane has no kubelet, so the Deployment's pods never run).
package localenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// Env is a running local environment. Stop removes everything it started.
type Env struct {
	Root       string // repository root
	Dir        string // scratch state, removed by Stop
	Kubeconfig string
	Client     client.Client
	Out        io.Writer // progress lines

	clusterEnv []string
	mu         sync.Mutex
	procs      []*exec.Cmd
	stops      []func()
}

// Step prints a progress line.
func (e *Env) Step(format string, args ...any) {
	fmt.Fprintf(e.Out, "==> "+format+"\n", args...)
}

// Start builds what is missing and starts the control plane with kube-controller-manager.
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
	e.Step("building the control plane if missing (a first build takes about 5 minutes)")
	if err := e.run(ctx, "hack/build-control-plane.sh", "kube-apiserver", "kube-controller-manager", "etcd"); err != nil {
		return nil, err
	}
	e.Step("building bin/manager and bin/confirmer")
	for _, b := range []string{"manager", "confirmer"} {
		if err := e.run(ctx, "go", "build", "-o", filepath.Join(root, "bin", b), "./cmd/"+b); err != nil {
			return nil, err
		}
	}
	etcd, err := freePort()
	if err != nil {
		return nil, err
	}
	api, err := freePort()
	if err != nil {
		return nil, err
	}
	e.clusterEnv = []string{"LOCAL_CLUSTER_DIR=" + filepath.Join(dir, "cluster"), fmt.Sprintf("ETCD_PORT=%d", etcd), fmt.Sprintf("APISERVER_PORT=%d", api)}
	e.Step("starting etcd, kube-apiserver and kube-controller-manager on loopback")
	if err := e.run(ctx, "hack/local-cluster.sh", "start", "--controller-manager"); err != nil {
		return nil, err
	}
	e.stops = append(e.stops, func() { _ = e.run(context.Background(), "hack/local-cluster.sh", "stop") })
	e.Kubeconfig = filepath.Join(dir, "cluster", "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = gatev1.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	e.Step("installing the CRDs")
	if err := e.installCRDs(ctx); err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}

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

func (e *Env) installCRDs(ctx context.Context) error {
	paths, err := filepath.Glob(filepath.Join(e.Root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		return err
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err = yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(crd)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if err := e.Client.Create(ctx, crd); err != nil {
			return err
		}
	}
	return Wait(ctx, 30*time.Second, func() (bool, error) {
		var list gatev1.HarnessAgentPolicyList
		return e.Client.List(ctx, &list) == nil, nil
	})
}

// Process starts a long-running process whose output goes to Dir/<name>.log.
func (e *Env) Process(name, bin string, args ...string) (*exec.Cmd, error) {
	logf, err := os.Create(filepath.Join(e.Dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = e.Root
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	e.mu.Lock()
	e.procs = append(e.procs, cmd)
	e.mu.Unlock()
	return cmd, nil
}

// Log returns the output of a process started by Process.
func (e *Env) Log(name string) string {
	b, _ := os.ReadFile(filepath.Join(e.Dir, name+".log"))
	return string(b)
}

// StartManager runs bin/manager against the local control plane.
func (e *Env) StartManager(args ...string) error {
	metrics, err := freePort()
	if err != nil {
		return err
	}
	probes, err := freePort()
	if err != nil {
		return err
	}
	base := []string{"--kubeconfig", e.Kubeconfig, fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics), fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probes)}
	_, err = e.Process("manager", filepath.Join(e.Root, "bin", "manager"), append(base, args...)...)
	return err
}

// StartDNS serves A records for the given hosts on a loopback UDP port and returns host:port.
func (e *Env) StartDNS(records map[string]string) (string, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		q := req.Question[0]
		ip, ok := records[strings.TrimSuffix(q.Name, ".")]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.ParseIP(ip)})
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	go func() { _ = srv.ActivateAndServe() }()
	e.stops = append(e.stops, func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String(), nil
}

// Stop ends every process, the control plane and the DNS stand-in, and removes Dir.
func (e *Env) Stop() {
	e.mu.Lock()
	procs := e.procs
	e.procs = nil
	e.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		if p.Process == nil {
			continue
		}
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
	e.stops = nil
	_ = os.RemoveAll(e.Dir)
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
