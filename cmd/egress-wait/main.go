// Command egress-wait is the init container that keeps a governed sandbox's agent from
// starting before the pod's egress NetworkPolicy is enforced on the pod. NetworkPolicies are
// enforced asynchronously: the enforcer (kube-router, Calico, Cilium, ...) programs a new pod's
// rules after it sees the pod, which on a busy node takes seconds, and until then the pod's
// traffic flows unfiltered. An init container shares the pod's network namespace and is
// subject to the same policy as the agent, so egress-wait probes what the policy decides.
//
// A failed connection alone proves nothing: kube-router rejects a blocked connection with the
// "connection refused" a closed port gives, and an unknown host, an API server restarting or a
// Service without endpoints fail as fast. So egress-wait uses the manager's egress canary
// (internal/egresscanary): every rendered egress policy allows its --control port and none
// allows its --denied port. Each round asks the control (which must answer, with this round's
// nonce, that the denied listener is up) and then dials the denied port; a failed dial counts
// as a block only in a round whose control said denied-listening, and never when it is a DNS
// error. egress-wait exits 0 after two such blocks in a row, and 1 after --timeout, so the pod
// fails rather than starts ungoverned.
//
// Sound with any enforcing CNI under one assumption, which holds for kube-router (one chain per
// pod), Calico and Cilium (one endpoint policy per pod): an enforcer programs a pod's egress
// rules as a unit, so the denied port's block means the whole policy is in force.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/intutic/gate-operator/internal/egresscanary"
)

func main() {
	os.Exit(run(os.Args[1:], time.Now, net.DialTimeout))
}

type dialFunc func(network, address string, timeout time.Duration) (net.Conn, error)

// verdict is what one round showed.
type verdict int

const (
	// unproven: the control failed, said denied-down, or the denied dial failed in a way that
	// proves nothing (DNS). Nothing is known about the policy.
	unproven verdict = iota
	// open: the denied port connected, so the policy is not (yet) enforced on the pod.
	open
	// blocked: the denied port failed while the control, through the same policy, said it was
	// listening.
	blocked
)

func run(args []string, now func() time.Time, dial dialFunc) int {
	fs := flag.NewFlagSet("egress-wait", flag.ContinueOnError)
	control := fs.String("control", "", "host:port of the manager's egress canary control port, which the pod's egress policy always allows (the injection passes it)")
	denied := fs.String("denied", "", "host:port of the manager's denied canary port, which no egress policy allows (the injection passes it)")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the policy to be enforced before failing the pod")
	interval := fs.Duration("interval", 100*time.Millisecond, "time between rounds that proved no block")
	connectTimeout := fs.Duration("connect-timeout", time.Second, "time limit of each connection and answer (a dropping enforcer is seen when it runs out)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, f := range []struct{ name, addr string }{{"--control", *control}, {"--denied", *denied}} {
		if _, _, err := net.SplitHostPort(f.addr); err != nil {
			fmt.Fprintf(os.Stderr, "egress-wait: %s %q is not host:port: both canaries are required, since a failed connection alone never proves enforcement\n", f.name, f.addr)
			return 2
		}
	}
	start := now()
	proven := 0
	for rounds := 1; ; rounds++ {
		v, why := round(*control, *denied, *connectTimeout, dial)
		if v == blocked {
			proven++
		} else {
			proven = 0
		}
		elapsed := now().Sub(start)
		if proven == 2 {
			fmt.Printf("egress-wait: egress policy enforced: %s blocked (%s) while the control said it was listening, after %s, %d rounds\n", *denied, why, elapsed.Round(time.Millisecond), rounds)
			return 0
		}
		if elapsed >= *timeout {
			fmt.Fprintf(os.Stderr, "egress-wait: no proof after %s that the pod's egress NetworkPolicy is enforced (last round: %s); failing the pod rather than starting it ungoverned\n", timeout.String(), why)
			return 1
		}
		if proven == 0 {
			time.Sleep(*interval)
		}
	}
}

// round asks the control port and then dials the denied port once.
func round(control, denied string, timeout time.Duration, dial dialFunc) (verdict, string) {
	nonce, err := newNonce()
	if err != nil {
		return unproven, err.Error()
	}
	c, err := dial("tcp", control, timeout)
	if err != nil {
		return unproven, fmt.Sprintf("control %s unreachable: %v", control, err)
	}
	listening, err := egresscanary.Ask(c, nonce, time.Now().Add(timeout))
	c.Close()
	switch {
	case err != nil:
		return unproven, fmt.Sprintf("control %s: %v", control, err)
	case !listening:
		return unproven, fmt.Sprintf("control %s says the denied canary is down", control)
	}
	d, err := dial("tcp", denied, timeout)
	if err == nil {
		d.Close()
		return open, fmt.Sprintf("%s reachable: the policy is not enforced yet", denied)
	}
	if dnsErr := (*net.DNSError)(nil); errors.As(err, &dnsErr) {
		return unproven, fmt.Sprintf("%s: %v", denied, err)
	}
	return blocked, err.Error()
}

func newNonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading a nonce: %w", err)
	}
	return hex.EncodeToString(b), nil
}
