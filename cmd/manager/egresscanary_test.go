package main

import (
	"maps"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/egress"
	"github.com/intutic/gate-operator/internal/webhook"
)

// TestEgressCanaryFlags: by default the manager serves the canary, every policy allows its
// control port on the manager's pods, and the pod webhook points egress-wait at its Service.
func TestEgressCanaryFlags(t *testing.T) {
	s, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if s.canaryServer == nil || s.canaryServer.Control != ":9444" || s.canaryServer.Denied != ":9445" {
		t.Errorf("canary server %+v", s.canaryServer)
	}
	want := egress.Canary{Namespace: "gate-system", Labels: map[string]string{"app.kubernetes.io/name": "gate-operator", "app.kubernetes.io/instance": "gate-operator", "app.kubernetes.io/component": "manager"}, Port: 9444}
	if s.canary.Namespace != want.Namespace || s.canary.Port != want.Port || !maps.Equal(s.canary.Labels, want.Labels) {
		t.Errorf("canary rule %+v, want %+v", s.canary, want)
	}
	if c := s.webhooks.EgressCanary; c != (webhook.EgressCanary{Service: "gate-operator-egress-canary", Namespace: "gate-system", ControlPort: 9444, DeniedPort: 9445}) {
		t.Errorf("injected canary %+v", c)
	}
	if c := webhook.DefaultEgressCanary; c != s.webhooks.EgressCanary {
		t.Errorf("the flags' defaults %+v are not webhook.DefaultEgressCanary %+v", s.webhooks.EgressCanary, c)
	}

	s, err = parse("--egress-canary-port=1444", "--egress-canary-denied-port=1445", "--egress-canary-service=canary", "--egress-canary-namespace=ops",
		"--egress-canary-pod-labels=app=gate", "--egress-canary-bind-host=0.0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if s.canaryServer.Control != "0.0.0.0:1444" || s.canaryServer.Denied != "0.0.0.0:1445" || s.canary.Namespace != "ops" || s.canary.Port != 1444 ||
		s.webhooks.EgressCanary != (webhook.EgressCanary{Service: "canary", Namespace: "ops", ControlPort: 1444, DeniedPort: 1445}) {
		t.Errorf("settings %+v %+v %+v", s.canaryServer, s.canary, s.webhooks.EgressCanary)
	}

	if s, err = parse("--egress-canary-port=0"); err != nil || s.canaryServer != nil || s.canary.Port != 0 {
		t.Errorf("--egress-canary-port=0: %v, %+v", err, s)
	}

	for args, msg := range map[string]string{
		"--egress-canary-port=70000":        "--egress-canary-port 70000 is not a port",
		"--egress-canary-denied-port=9444":  "the denied port must be one no policy allows",
		"--egress-canary-denied-port=0":     "--egress-canary-denied-port 0 is not a port",
		"--egress-canary-service=Canary":    "--egress-canary-service",
		"--egress-canary-namespace=a.b":     "--egress-canary-namespace",
		"--egress-canary-pod-labels=broken": "--egress-canary-pod-labels",
	} {
		if _, err := parse(args); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: error %v, want %q", args, err, msg)
		}
	}
}
