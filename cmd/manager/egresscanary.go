package main

import (
	"flag"
	"fmt"
	"net"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/intutic/gate-operator/internal/egress"
	"github.com/intutic/gate-operator/internal/egresscanary"
	"github.com/intutic/gate-operator/internal/webhook"
)

// canaryFlags are the egress canary's flags (internal/egresscanary): the manager serves it on
// every replica, every egress NetworkPolicy allows its control port, and the injected
// egress-wait reaches it through its Service.
type canaryFlags struct {
	bindHost                string
	controlPort, deniedPort int
	service, namespace      string
	podLabels               string
}

func bindCanaryFlags(fs *flag.FlagSet) *canaryFlags {
	var f canaryFlags
	fs.IntVar(&f.controlPort, "egress-canary-port", egresscanary.DefaultControlPort, "port of the egress canary's control listener, on the manager's pods and its Service: every egress NetworkPolicy allows it, and egress-wait asks it whether the denied port is listening; 0 serves no canary and allows none, and then every injected pod fails at wait-for-egress-policy")
	fs.IntVar(&f.deniedPort, "egress-canary-denied-port", egresscanary.DefaultDeniedPort, "port of the egress canary's denied listener, on the manager's pods and its Service: no egress NetworkPolicy allows it, so egress-wait proves a policy enforced by seeing it blocked while the control says it listens")
	fs.StringVar(&f.bindHost, "egress-canary-bind-host", "", "host the egress canary's listeners bind; empty binds every address")
	fs.StringVar(&f.service, "egress-canary-service", "gate-operator-egress-canary", "the egress canary's Service in --egress-canary-namespace, which the injected egress-wait dials (the pod webhook reads its ClusterIP from the API server, which the manager's Role allows for this Service alone: a deny-all pod cannot use DNS)")
	fs.StringVar(&f.namespace, "egress-canary-namespace", "gate-system", "the manager's namespace, where the egress canary's Service is; egress NetworkPolicies allow the control port of the manager's pods there")
	fs.StringVar(&f.podLabels, "egress-canary-pod-labels", "app.kubernetes.io/component=manager,app.kubernetes.io/instance=gate-operator,app.kubernetes.io/name=gate-operator", "labels of the manager's pods, as key=value[,key=value]: egress NetworkPolicies allow the control port of the pods that carry them in --egress-canary-namespace")
	return &f
}

// checkCanaryFlags validates the canary flags and sets the canary's settings in s; every
// error names a flag.
func checkCanaryFlags(s *settings, f *canaryFlags) error {
	if f.controlPort == 0 {
		return nil
	}
	for _, p := range []struct {
		flag string
		port int
	}{{"--egress-canary-port", f.controlPort}, {"--egress-canary-denied-port", f.deniedPort}} {
		if p.port < 1 || p.port > 65535 {
			return fmt.Errorf("%s %d is not a port", p.flag, p.port)
		}
	}
	if f.controlPort == f.deniedPort {
		return fmt.Errorf("--egress-canary-denied-port %d is --egress-canary-port: the denied port must be one no policy allows", f.deniedPort)
	}
	if errs := validation.IsDNS1035Label(f.service); len(errs) > 0 {
		return fmt.Errorf("--egress-canary-service %q: %s", f.service, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(f.namespace); len(errs) > 0 {
		return fmt.Errorf("--egress-canary-namespace %q: %s", f.namespace, strings.Join(errs, "; "))
	}
	podLabels, err := labels.ConvertSelectorToLabelsMap(f.podLabels)
	if err != nil || len(podLabels) == 0 {
		return fmt.Errorf("--egress-canary-pod-labels %q is not key=value[,key=value]", f.podLabels)
	}
	s.canaryServer = &egresscanary.Server{
		Control: net.JoinHostPort(f.bindHost, fmt.Sprint(f.controlPort)),
		Denied:  net.JoinHostPort(f.bindHost, fmt.Sprint(f.deniedPort)),
	}
	s.canary = egress.Canary{Namespace: f.namespace, Labels: podLabels, Port: int32(f.controlPort)}
	s.webhooks.EgressCanary = webhook.EgressCanary{
		Service:     f.service,
		Namespace:   f.namespace,
		ControlPort: int32(f.controlPort),
		DeniedPort:  int32(f.deniedPort),
	}
	return nil
}
