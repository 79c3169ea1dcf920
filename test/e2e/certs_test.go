package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intutic/gate-operator/internal/localenv"
)

// certValues shorten the webhook serving certificate's life so that it is renewed about every
// minute during the test: renewal keeps the CA, so no admission may fail while kubelet delivers
// the renewed Secret and the manager's certificate watcher picks it up.
var certValues = []string{
	"--set", "webhook.selfManaged.certLifetime=4m",
	"--set", "webhook.selfManaged.renewBefore=3m",
	"--set", "webhook.selfManaged.checkInterval=5s",
}

// testCertRotation creates a labelled pod (server-side dry run, so through the pod webhook)
// every second until the certificate the webhook serves has changed and ten more admissions
// have passed, and asserts that none failed.
func testCertRotation(ctx context.Context, t *testing.T, env *localenv.Env) {
	b, err := os.ReadFile(filepath.Join(env.Root, "docs", "examples", "sandbox-pod-labelled.yaml"))
	must(t, err)
	pod := strings.Replace(string(b), "registry.example/coding-agent:1.0", localenv.TestbedImage, 1)
	pod = strings.Replace(pod, "name: coding-agent-0", "name: rotation-probe", 1)
	svc, err := env.Kubectl(ctx, "", "-n", localenv.OperatorNamespace, "get", "service", "gate-operator-webhook", "-o", "jsonpath={.spec.clusterIP}")
	must(t, err)
	addr := net.JoinHostPort(strings.TrimSpace(svc), "443")
	first := servedCert(addr)
	if first == "" {
		t.Fatalf("the webhook Service %s serves no certificate", addr)
	}
	start := time.Now()
	var admissions, failures, after int
	rotated := ""
	for time.Since(start) < 4*time.Minute && (rotated == "" || after < 10) {
		_, err := env.Kubectl(ctx, pod, "create", "--dry-run=server", "-f", "-")
		admissions++
		if err != nil {
			failures++
			t.Errorf("admission %d failed at %s: %v", admissions, time.Since(start).Round(time.Second), err)
		}
		if rotated == "" {
			if now := servedCert(addr); now != "" && now != first {
				rotated = now
				t.Logf("the webhook serves a renewed certificate after %s (%s... -> %s...)", time.Since(start).Round(time.Second), first[:12], now[:12])
			}
		} else {
			after++
		}
		time.Sleep(time.Second)
	}
	if rotated == "" {
		t.Fatalf("the served certificate did not change in 4 minutes (lifetime 4m, renewed 3m before expiry)")
	}
	t.Logf("%d admissions through the pod webhook across the renewal, %d failed", admissions, failures)
}

// servedCert is the SHA-256 of the leaf certificate served at addr, or "" when none.
func servedCert(addr string) string {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate, trusts nothing
	if err != nil {
		return ""
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return ""
	}
	sum := sha256.Sum256(certs[0].Raw)
	return hex.EncodeToString(sum[:])
}
