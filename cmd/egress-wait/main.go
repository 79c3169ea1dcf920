// Command egress-wait is the init container that keeps a governed sandbox's agent from
// starting before the pod's egress NetworkPolicy is enforced on the pod. NetworkPolicies are
// enforced asynchronously: the enforcer (kube-router, Calico, Cilium, ...) programs a new pod's
// rules after it sees the pod, which on a busy node takes seconds, and until then the pod's
// traffic flows unfiltered. An init container shares the pod's network namespace and is
// subject to the same policy as the agent, so egress-wait probes a destination the policy
// denies (the canary: by default the Kubernetes API Service, which kubelet names in every
// container's environment and which a sandbox's policy never allows) and exits 0 only once a
// connection to it fails twice in a row. It exits 1 after --timeout, so the pod fails rather
// than starts ungoverned.
//
// Sound with any enforcing CNI under one assumption, which holds for kube-router (one chain per
// pod), Calico and Cilium (one endpoint policy per pod): an enforcer programs a pod's egress
// rules as a unit, so the canary's block means the whole policy is in force. A canary the
// policy allows (allowedCIDRs covering the API server) is never blocked: set --canary to a
// destination the policy denies.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], time.Now, net.DialTimeout))
}

type dialFunc func(network, address string, timeout time.Duration) (net.Conn, error)

func run(args []string, now func() time.Time, dial dialFunc) int {
	fs := flag.NewFlagSet("egress-wait", flag.ContinueOnError)
	canary := fs.String("canary", "", "host:port the pod's egress policy denies; empty means the Kubernetes API Service ($KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the policy to be enforced before failing the pod")
	interval := fs.Duration("interval", 100*time.Millisecond, "time between probes")
	connectTimeout := fs.Duration("connect-timeout", time.Second, "time limit of each probe (a dropping enforcer is seen when it runs out)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *canary == "" {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" || port == "" {
			fmt.Fprintln(os.Stderr, "egress-wait: no --canary and no KUBERNETES_SERVICE_HOST/PORT in the environment")
			return 1
		}
		*canary = net.JoinHostPort(host, port)
	}
	start := now()
	blocked := 0
	for attempt := 1; ; attempt++ {
		conn, err := dial("tcp", *canary, *connectTimeout)
		if err == nil {
			conn.Close()
			blocked = 0
		} else {
			blocked++
		}
		elapsed := now().Sub(start)
		if blocked == 2 {
			fmt.Printf("egress-wait: egress policy enforced: %s blocked (%v) after %s, %d probes\n", *canary, err, elapsed.Round(time.Millisecond), attempt)
			return 0
		}
		if elapsed >= *timeout {
			fmt.Fprintf(os.Stderr, "egress-wait: %s still reachable after %s: the pod's egress NetworkPolicy is not enforced (no enforcer, or it allows %s; set --canary to a destination it denies); failing the pod rather than starting it ungoverned\n", *canary, timeout.String(), *canary)
			return 1
		}
		if blocked == 0 {
			time.Sleep(*interval)
		}
	}
}
