// Command bench-approvals measures the human lane end to end (hack/bench-approvals.sh builds
// the confirmer, starts a throwaway local control plane with the ToolApproval CRD and runs it):
// -sessions Managed Agents sessions on the in-process Sessions API fake (HTTP/2 over TLS, as
// the real API speaks) each pause on -calls calls that the policy sends to a human;
// -replicas confirmer processes share the sessions through a members Lease and create one
// ToolApproval per call; a script then approves every one of them in bulk, writing each
// approval's status as `kubectl gate approve` does (state, condition, message) plus the
// decider the admission webhook would record (the webhook is not running here). It reports
// whether every call was confirmed exactly once (the fake records a second confirmation
// instead of refusing it, so a duplicate would show), and the time from the start of each
// approval's status write to its confirmation at the fake (p50, p99, max).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/gate"
)

var (
	confirmerBin = flag.String("confirmer", "bin/confirmer", "confirmer binary")
	kubeconfig   = flag.String("kubeconfig", "", "kubeconfig of a control plane with the ToolApproval CRD installed")
	sessions     = flag.Int("sessions", 200, "sessions")
	calls        = flag.Int("calls", 5, "calls each session pauses on, each sent to a human")
	replicas     = flag.Int("replicas", 2, "confirmer replicas sharing the sessions")
	approvers    = flag.Int("approvers", 16, "concurrent status writes of the approving script")
)

const (
	apiKey    = "sk-ant-bench"
	namespace = "bench-approvals"
	confirmer = "bench"
	policy    = "coding-agents"
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-approvals:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000 // the script's own client: a bulk approval is its point
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = gatev1.AddToScheme(scheme)
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := cl.DeleteAllOf(ctx, &gatev1.ToolApproval{}, client.InNamespace(namespace)); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-approvals-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fake := anthropictest.NewTLS(apiKey)
	defer fake.Close()
	fake.AcceptDuplicateConfirmations(true)
	if err := writeFiles(dir, fake); err != nil {
		return err
	}
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	for i := range *replicas {
		p, err := startConfirmer(dir, fake.URL, fmt.Sprintf("replica-%d", i))
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}

	ids, list, err := holdCalls(ctx, cl, fake)
	if err != nil {
		return err
	}
	writes, err := approveAll(ctx, cl, list)
	if err != nil {
		return err
	}
	if err := waitFor(2*time.Minute, func() bool {
		for _, id := range ids {
			if len(fake.Pending(id)) > 0 {
				return false
			}
		}
		return true
	}); err != nil {
		return fmt.Errorf("calls still waiting after the approvals: %w", err)
	}
	time.Sleep(2 * time.Second) // a duplicate confirmation, if any, has time to arrive
	if err := report(fake, ids, writes); err != nil {
		return err
	}
	for _, p := range procs {
		fmt.Printf("  %s: %s\n", p.name, p.confirmations())
	}
	return nil
}

// writeFiles writes what the confirmers read: the policy (deploys need a human), the API key,
// the fake's CA and the kubeconfig.
func writeFiles(dir string, fake *anthropictest.Server) error {
	snap, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: namespace + "/" + policy, Generation: 1},
		[]gate.Rule{{Name: "deploys-need-human", Tools: []string{"mcp__deploy__*"}, Action: gate.Ask, Reason: "deploys need a human"}})
	if err != nil {
		return err
	}
	data, _ := snap.Encode()
	raw, err := os.ReadFile(*kubeconfig)
	if err != nil {
		return err
	}
	for name, content := range map[string][]byte{gate.SnapshotFileName: data, "api-key": []byte(apiKey), "kubeconfig": raw} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			return err
		}
	}
	return fake.WriteCA(filepath.Join(dir, "ca.pem"))
}

// holdCalls starts the sessions, each paused on -calls deploys, and waits for the confirmers
// to create the ToolApprovals.
func holdCalls(ctx context.Context, cl client.Client, fake *anthropictest.Server) ([]string, []gatev1.ToolApproval, error) {
	deploy := anthropictest.ToolUse{Type: "agent.mcp_tool_use", MCPServer: "deploy", Name: "run", Input: map[string]any{"env": "prod"}, Permission: "ask"}
	ids := make([]string, *sessions)
	total := *sessions * *calls
	started := time.Now()
	for i := range ids {
		ids[i] = fmt.Sprintf("sesn_%04d", i)
		fake.AddSession(ids[i], "agent_bench", slices.Repeat([]anthropictest.ToolUse{deploy}, *calls)...)
	}
	var list gatev1.ToolApprovalList
	if err := waitFor(5*time.Minute, func() bool {
		return cl.List(ctx, &list, client.InNamespace(namespace)) == nil && len(list.Items) == total
	}); err != nil {
		return nil, nil, fmt.Errorf("%d of %d ToolApprovals created: %w", len(list.Items), total, err)
	}
	fmt.Printf("%d held calls in %d sessions: %d ToolApprovals created by %d replicas in %.1f s\n", total, *sessions, total, *replicas, time.Since(started).Seconds())
	return ids, list.Items, nil
}

// writeTimes are when each approval's status write started and was acknowledged, by tool-use id.
type writeTimes struct{ start, done map[string]time.Time }

// approveAll is the approving script: -approvers concurrent status writes, one per approval.
func approveAll(ctx context.Context, cl client.Client, list []gatev1.ToolApproval) (writeTimes, error) {
	w := writeTimes{start: make(map[string]time.Time, len(list)), done: make(map[string]time.Time, len(list))}
	var mu sync.Mutex
	var failed error
	work := make(chan gatev1.ToolApproval)
	var wg sync.WaitGroup
	bulk := time.Now()
	for range *approvers {
		wg.Go(func() {
			for ta := range work {
				at, err := approve(ctx, cl, &ta)
				done := time.Now()
				mu.Lock()
				w.start[ta.Spec.ToolUseID], w.done[ta.Spec.ToolUseID] = at, done
				failed = cmp.Or(failed, err)
				mu.Unlock()
			}
		})
	}
	for _, ta := range list {
		work <- ta
	}
	close(work)
	wg.Wait()
	fmt.Printf("approved %d ToolApprovals in %.1f s (%d concurrent status writes)\n", len(list), time.Since(bulk).Seconds(), *approvers)
	return w, failed
}

// report counts the confirmations at the fake and prints the latencies.
func report(fake *anthropictest.Server, ids []string, w writeTimes) error {
	var lat, afterAck []time.Duration
	confirmed, dup, wrong := 0, 0, 0
	for _, id := range ids {
		seen := map[string]bool{}
		for _, c := range fake.Confirmations(id) {
			tid := c["tool_use_id"].(string)
			if seen[tid] {
				dup++
				continue
			}
			seen[tid] = true
			confirmed++
			if c["result"] != "allow" {
				wrong++
			}
			if at, err := time.Parse(time.RFC3339Nano, c["processed_at"].(string)); err == nil {
				lat = append(lat, at.Sub(w.start[tid]))
				afterAck = append(afterAck, at.Sub(w.done[tid]))
			}
		}
	}
	total := *sessions * *calls
	fmt.Printf("confirmations: %d of %d calls confirmed, %d twice, %d not allow (fake's count)\n", confirmed, total, dup, wrong)
	if len(lat) > 0 {
		fmt.Printf("approval write to confirmation: p50 %s, p99 %s, max %s (n=%d)\n", quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 1), len(lat))
		fmt.Printf("  from the write's acknowledgment: p50 %s, p99 %s (negative: the confirmation arrived before the API server's answer did)\n",
			quantile(afterAck, 0.5), quantile(afterAck, 0.99))
	}
	if confirmed != total || dup != 0 || wrong != 0 {
		return errors.New("not every call was confirmed exactly once with allow")
	}
	return nil
}

func quantile(d []time.Duration, q float64) time.Duration {
	slices.Sort(d)
	return d[min(len(d)-1, int(q*float64(len(d))))].Round(100 * time.Microsecond)
}

// approve writes an approval's status as kubectl gate approve does, with the decider the
// mutating admission webhook would fill in; it returns when the write started.
func approve(ctx context.Context, cl client.Client, ta *gatev1.ToolApproval) (time.Time, error) {
	at := time.Now()
	if err := ta.Settle(gatev1.ApprovalApproved, gatev1.ApprovalApproved.ApproverReason(), "bulk approval", at); err != nil {
		return at, err
	}
	ta.Status.Decision = &gatev1.ToolApprovalDecision{User: "bench-approver", Groups: []string{"approvers"}, Time: &metav1.Time{Time: at}, Message: "bulk approval"}
	return at, cl.Status().Update(ctx, ta)
}

func waitFor(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// proc is one confirmer process.
type proc struct {
	name, addr string
	metrics    string // its --metrics-listen
	cmd        *exec.Cmd
	log        *os.File
	done       chan struct{}
}

func startConfirmer(dir, fakeURL, name string) (*proc, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		l.Close()
		return nil, err
	}
	addr, metrics := l.Addr().String(), ml.Addr().String()
	l.Close()
	ml.Close()
	p := &proc{name: name, addr: addr, metrics: metrics, done: make(chan struct{})}
	p.cmd = exec.Command(*confirmerBin, "--listen", addr, "--metrics-listen", metrics, "--insecure-no-auth", "--snapshot", filepath.Join(dir, gate.SnapshotFileName),
		"--anthropic-base-url", fakeURL, "--anthropic-api-key-file", filepath.Join(dir, "api-key"), "--anthropic-ca-file", filepath.Join(dir, "ca.pem"),
		"--agent-ids", "agent_bench", "--poll-interval", "10s", "--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"--members-lease", confirmer+"-confirmer", "--leader-election-namespace", namespace, "--leader-election-identity", name,
		"--confirmer-name", confirmer, "--confirmer-uid", "00000000-0000-4000-8000-00000000beef", "--namespace", namespace, "--policy", policy,
		"--human-approval-deadline", "30m")
	if p.log, err = os.Create(filepath.Join(os.TempDir(), "bench-approvals-"+name+".log")); err != nil {
		return nil, err
	}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	if err := waitFor(2*time.Minute, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}); err != nil {
		p.stop()
		return nil, fmt.Errorf("confirmer %s (log %s): %w", name, p.log.Name(), err)
	}
	return p, nil
}

// confirmations are the replica's confirmer_confirmations_total samples.
func (p *proc) confirmations() string {
	resp, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	return grepMetrics(resp.Body, "confirmer_confirmations_total", "confirmer_tool_approvals_total")
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.log.Close()
}
