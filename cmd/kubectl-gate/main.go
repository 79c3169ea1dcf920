// Command kubectl-gate is the kubectl plugin that answers ToolApprovals: `kubectl gate approve`
// and `kubectl gate deny` write a decision through the status subresource, where the manager's
// decision webhook records who made it and refuses it unless they may approve the policy that
// held the call; `kubectl gate pending` lists what waits for a human; `kubectl gate explain`
// says which policies decide a pod's calls and, for a call, what each of them answers;
// `kubectl gate decisions` reads the decision trail from the pods' logs. Install it with
//
//	go install github.com/intutic/gate-operator/cmd/kubectl-gate@latest
//
// and kubectl finds it on $PATH. It reads the kubeconfig as kubectl does (--kubeconfig, else
// $KUBECONFIG, else ~/.kube/config; --context; the context's namespace unless -n).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailed  = 1 // the API server refused, or could not be reached
	exitUsage   = 2
	resource    = "toolapproval.gate.intutic.io"
	defaultNote = "with kubectl gate"
)

const usage = `kubectl gate answers the tool calls gate-operator holds for a human (ToolApprovals),
and explains what governs a pod.

Usage:
  kubectl gate pending [-n NAMESPACE | -A]
  kubectl gate approve NAME [-n NAMESPACE] [--message TEXT]
  kubectl gate deny NAME [-n NAMESPACE] [--message TEXT]
  kubectl gate explain POD [-n NAMESPACE] [--tool TOOL [--input JSON]]
  kubectl gate decisions [-n NAMESPACE | -A] [--pod P | --policy NAME | --session S]
                         [--since 1h] [--verdict Block] [-o json]

explain prints the policies that decide the pod's calls, in the order they are combined
(cluster policies by priority, then the namespace policy), from the bundle its hook reads, and
its egress; with --tool, every layer's verdict on that call and the result.

decisions reads the decision records (docs/decision-log.md) that the gate-agent sidecars and
the confirmers write to their logs, through the API server (it needs list on pods and get on
pods/log), merges them in time order and prints a table; -o json prints them as stored, one per
line.

Approving or denying needs the verb approve on the approval's HarnessAgentPolicy (bind the
ClusterRole gate-operator-approver); the API server records who decided.

Flags of every command:
  --kubeconfig PATH   kubeconfig file (default $KUBECONFIG, else ~/.kube/config)
  --context NAME      kubeconfig context (default the current context)
  -n, --namespace NS  namespace (default the context's namespace)
  --as USER           act as USER (impersonation, as kubectl --as; needs the impersonate verb)
  --as-group GROUP    act as a member of GROUP (repeatable; with --as)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, clock.RealClock{}, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs one command line and returns its exit status; clk is the time of the decision's
// condition and of the ages pending prints.
func run(ctx context.Context, clk clock.PassiveClock, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd := args[0]
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "approve", "deny", "pending", "explain":
	case cmdDecisions:
		return runDecisions(ctx, clk, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "kubectl gate: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	fs, o := flags(cmd, stderr)
	var message, tool, input string
	var all bool
	switch cmd {
	case "pending":
		fs.BoolVarP(&all, "all-namespaces", "A", false, "list pending approvals in every namespace")
	case "explain":
		fs.StringVar(&tool, "tool", "", "decide a call of this tool, as the runtime names it (Bash, Read, mcp__server__tool)")
		fs.StringVar(&input, "input", "", "the call's tool input, JSON (with --tool)")
	default:
		fs.StringVarP(&message, "message", "m", "", "why; for a denial, part of the refusal the agent reads")
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	wantArgs := 1
	if cmd == "pending" {
		wantArgs = 0
	}
	if fs.NArg() != wantArgs {
		fmt.Fprintf(stderr, "kubectl gate %s: want %d argument(s), got %q\n\n%s", cmd, wantArgs, fs.Args(), usage)
		return exitUsage
	}
	c, ns, err := o.client()
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFailed
	}
	switch cmd {
	case "pending":
		if all {
			ns = ""
		}
		err = pending(ctx, c, ns, clk.Now(), stdout, stderr)
	case "explain":
		err = explain(ctx, c, client.ObjectKey{Namespace: ns, Name: fs.Arg(0)}, tool, input, clk.Now(), stdout)
	default:
		state := gatev1.ApprovalApproved
		if cmd == "deny" {
			state = gatev1.ApprovalDenied
		}
		err = answer(ctx, c, client.ObjectKey{Namespace: ns, Name: fs.Arg(0)}, state, message, clk.Now(), stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// flags is the flag set of cmd with the flags every command has, parsed into the options.
func flags(cmd string, stderr io.Writer) (*pflag.FlagSet, *options) {
	fs := pflag.NewFlagSet("kubectl gate "+cmd, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file")
	fs.StringVar(&o.context, "context", "", "kubeconfig context")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "namespace")
	fs.StringVar(&o.as, "as", "", "user to impersonate")
	fs.StringArrayVar(&o.asGroups, "as-group", nil, "group to impersonate (repeatable)")
	return fs, o
}

// options locate the cluster as kubectl does.
type options struct {
	kubeconfig, context, namespace string
	as                             string
	asGroups                       []string
}

// restConfig loads the kubeconfig with client-go's loading rules and returns its REST config
// and the namespace: -n, else the context's, else default.
func (o *options) restConfig() (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.context}
	overrides.Context.Namespace = o.namespace
	overrides.AuthInfo.Impersonate, overrides.AuthInfo.ImpersonateGroups = o.as, o.asGroups
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := cc.Namespace()
	return cfg, ns, err
}

// clientset is client-go's typed client, for the pods' logs.
func (o *options) clientset() (kubernetes.Interface, string, error) {
	cfg, ns, err := o.restConfig()
	if err != nil {
		return nil, "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	return cs, ns, err
}

// client returns a controller-runtime client and the namespace (restConfig).
func (o *options) client() (client.Client, string, error) {
	cfg, ns, err := o.restConfig()
	if err != nil {
		return nil, "", err
	}
	scheme := runtime.NewScheme()
	if err := gatev1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	if err := corev1.AddToScheme(scheme); err != nil { // explain reads pods and ConfigMaps
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	return c, ns, err
}

// answer writes a decision on the approval key, as it reads now: the update carries its
// resourceVersion, so a decision someone else wrote in between makes it fail (Conflict) rather
// than be overwritten (the webhook would refuse that too).
func answer(ctx context.Context, c client.Client, key client.ObjectKey, state gatev1.ToolApprovalState, message string, now time.Time, stdout io.Writer) error {
	ta := &gatev1.ToolApproval{}
	if err := c.Get(ctx, key, ta); err != nil {
		return err
	}
	if err := decide(ctx, c, ta, state, message, now); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s/%s %s\n", resource, ta.Name, strings.ToLower(string(state)))
	return nil
}

// decide settles ta in state, with its condition and message, through the status subresource.
// Who decided, and when, is the API server's to record.
func decide(ctx context.Context, c client.Client, ta *gatev1.ToolApproval, state gatev1.ToolApprovalState, message string, now time.Time) error {
	note := message
	if note == "" {
		note = strings.ToLower(string(state)) + " " + defaultNote // "approved with kubectl gate"
	}
	if err := ta.Settle(state, state.ApproverReason(), note, now); err != nil {
		return err
	}
	ta.Status.Decision = &gatev1.ToolApprovalDecision{Message: message}
	err := c.Status().Update(ctx, ta)
	if apierrors.IsConflict(err) {
		return fmt.Errorf("ToolApproval %s/%s changed while you decided (another answer may have arrived): look again with kubectl gate pending or kubectl get toolapproval: %w", ta.Namespace, ta.Name, err)
	}
	return err
}

// pending prints the approvals still waiting for a human in ns ("" is every namespace), those
// expiring first at the top.
func pending(ctx context.Context, c client.Client, ns string, now time.Time, stdout, stderr io.Writer) error {
	list := &gatev1.ToolApprovalList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	items := slices.DeleteFunc(list.Items, func(ta gatev1.ToolApproval) bool {
		return ta.Status.State.Final()
	})
	if len(items) == 0 {
		if ns == "" {
			fmt.Fprintln(stderr, "No pending ToolApprovals.")
		} else {
			fmt.Fprintf(stderr, "No pending ToolApprovals in namespace %s.\n", ns)
		}
		return nil
	}
	slices.SortStableFunc(items, func(a, b gatev1.ToolApproval) int {
		if d := a.Spec.ExpiresAt.Compare(b.Spec.ExpiresAt.Time); d != 0 {
			return d
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	w := tabwriter.NewWriter(stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tNAME\tTOOL\tPOLICY\tRULE\tSESSION\tAGE\tEXPIRES-IN")
	for _, ta := range items {
		expires := "expired"
		if left := ta.Spec.ExpiresAt.Sub(now); left > 0 {
			expires = duration.HumanDuration(left)
		}
		policy := ta.Spec.Policy
		if ta.Spec.ClusterPolicy != "" {
			policy = "ClusterHarnessAgentPolicy/" + ta.Spec.ClusterPolicy // its approvers answer it
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ta.Namespace, ta.Name, ta.Spec.Tool, policy, orNone(ta.Spec.Rule),
			orNone(ta.Spec.SessionID), duration.HumanDuration(now.Sub(ta.CreationTimestamp.Time)), expires)
	}
	return w.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
