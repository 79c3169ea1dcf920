package webhook

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/testutil"
	"github.com/intutic/gate-operator/internal/webhook/webhooktest"
)

// TestSelfManagedCertificates runs two replicas of the webhooks with the self-managed
// certificates (cert-controller's rotator) and leader election on, each with its own copy of
// the Secret written the way kubelet writes a mounted Secret. Both replicas serve, the leader and
// the other, with a certificate from the one Secret; the CA is in both configurations; and the
// API server's calls (the policy webhook on one replica, the pod webhook on the other, both
// failurePolicy Fail) all succeed while the serving certificate, given a 30 s lifetime, is
// renewed under them.
func TestSelfManagedCertificates(t *testing.T) {
	if testing.Short() {
		t.Skip("renews certificates for half a minute")
	}
	ctx := testutil.Context(t, 3*time.Minute)
	const (
		system = "rotator-system"
		secret = "rotator-webhook-cert"
		config = "rotator-test"
	)
	must(t, k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: system}}))
	must(t, k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: secret}}))
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "rotated-")
	nsObj := &corev1.Namespace{}
	must(t, k8sClient.Get(ctx, client.ObjectKey{Name: ns}, nsObj))
	nsObj.Labels["rotator-test"] = "true"
	must(t, k8sClient.Update(ctx, nsObj))

	ports := [2]int{freePort(t), freePort(t)}
	url := func(i int, path string) *string { return ptr.To(fmt.Sprintf("https://localhost:%d%s", ports[i], path)) }
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"rotator-test": "true"}}
	must(t, k8sClient.Create(ctx, &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: config},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name: "policies.rotator-test.gate.intutic.io", AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregv1.WebhookClientConfig{URL: url(0, PolicyPath)},
			Rules: []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update},
				Rule: admissionregv1.Rule{APIGroups: []string{gatev1.GroupVersion.Group}, APIVersions: []string{"v1alpha1"}, Resources: []string{"harnessagentpolicies"}}}},
			NamespaceSelector: selector, FailurePolicy: ptr.To(admissionregv1.Fail), SideEffects: ptr.To(admissionregv1.SideEffectClassNone),
		}},
	}))
	must(t, k8sClient.Create(ctx, &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: config},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name: "pods.rotator-test.gate.intutic.io", AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregv1.WebhookClientConfig{URL: url(1, PodPath)},
			Rules: []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create},
				Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector: selector, ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: gatev1.LabelPolicy, Operator: metav1.LabelSelectorOpExists}}},
			FailurePolicy: ptr.To(admissionregv1.Fail), SideEffects: ptr.To(admissionregv1.SideEffectClassNone),
			ReinvocationPolicy: ptr.To(admissionregv1.IfNeededReinvocationPolicy),
		}},
	}))

	// Two replicas, each with its directory kept from the Secret as kubelet would.
	var servers [2]*Server
	var managers [2]ctrl.Manager
	for i := range 2 {
		dir := t.TempDir()
		servers[i] = NewServer(Options{
			Host: "127.0.0.1", Port: ports[i], GateHookImage: testGateHookImage,
			Certs: CertOptions{
				Mode: CertsSelf, Dir: dir, Namespace: system, SecretName: secret, ServiceName: "rotator-webhook",
				ExtraDNSNames: []string{"localhost"}, ConfigurationName: config,
				CALifetime: time.Hour, CertLifetime: 30 * time.Second, RenewBefore: 20 * time.Second, CheckInterval: time.Second,
				controllerName: "rotator-" + strconv.Itoa(i),
			},
		})
		mgr, err := ctrl.NewManager(testConfig, ctrl.Options{
			Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
			WebhookServer: servers[i], LeaderElection: true, LeaderElectionID: "rotator-test", LeaderElectionNamespace: system,
			LeaderElectionReleaseOnCancel: true,
		})
		must(t, err)
		must(t, servers[i].SetupWithManager(mgr, mgr.GetAPIReader()))
		managers[i] = mgr
		startManager(t, mgr)
		go webhooktest.MountSecret(ctx, t, k8sClient, client.ObjectKey{Namespace: system, Name: secret}, dir)
	}

	for i, s := range servers {
		check := s.StartedChecker()
		testutil.Eventually(t, time.Minute, func() error { return check(nil) })
		t.Logf("replica %d serves", i)
	}
	// One replica leads; the other serves all the same.
	lease := &coordinationv1.Lease{}
	testutil.Eventually(t, 30*time.Second, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: system, Name: "rotator-test"}, lease); err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return fmt.Errorf("no leader yet")
		}
		return nil
	})

	// The CA of the Secret is in both configurations.
	sec := &corev1.Secret{}
	must(t, k8sClient.Get(ctx, client.ObjectKey{Namespace: system, Name: secret}, sec))
	ca := sec.Data["ca.crt"]
	if len(ca) == 0 || len(sec.Data["tls.crt"]) == 0 || len(sec.Data["tls.key"]) == 0 {
		t.Fatalf("the Secret holds %d keys, want ca.crt, ca.key, tls.crt and tls.key", len(sec.Data))
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		v := &admissionregv1.ValidatingWebhookConfiguration{}
		m := &admissionregv1.MutatingWebhookConfiguration{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: config}, v); err != nil {
			return err
		}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: config}, m); err != nil {
			return err
		}
		if !bytes.Equal(v.Webhooks[0].ClientConfig.CABundle, ca) || !bytes.Equal(m.Webhooks[0].ClientConfig.CABundle, ca) {
			return fmt.Errorf("the configurations' caBundle is not the Secret's CA")
		}
		return nil
	})

	policy := policyWith(ns, "coding-agents")
	must(t, k8sClient.Create(ctx, policy))
	pod := examplePod(t, "sandbox-pod-labelled.yaml", ns)
	admit := func() error {
		p := policyWith(ns, "dry-run", gatev1.Rule{Name: "r", When: `input.command == "x"`, Action: gatev1.ActionBlock, Reason: "r"})
		if err := k8sClient.Create(ctx, p, client.DryRunAll); err != nil {
			return fmt.Errorf("policy (replica 0): %w", err)
		}
		q := pod.DeepCopy()
		if err := k8sClient.Create(ctx, q, client.DryRunAll); err != nil {
			return fmt.Errorf("pod (replica 1): %w", err)
		}
		if len(q.Spec.InitContainers) != len(injectedInitContainers(InjectOptions{})) {
			return fmt.Errorf("pod (replica 1) not injected")
		}
		return nil
	}
	must(t, admit())
	broken := policyWith(ns, "broken", gatev1.Rule{Name: "r", When: `inptu`, Action: gatev1.ActionBlock, Reason: "r"})
	if err := k8sClient.Create(ctx, broken, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "spec.rules[0].when: ") {
		t.Errorf("a broken policy through replica 0: %v", err)
	}

	// Admissions every 200 ms while the serving certificate is renewed at least twice.
	certs := map[string]bool{string(sec.Data["tls.crt"]): true}
	deadline := time.Now().Add(75 * time.Second)
	var failures []string
	admissions := 0
	for len(certs) < 3 && time.Now().Before(deadline) {
		if err := admit(); err != nil {
			failures = append(failures, err.Error())
		}
		admissions++
		s := &corev1.Secret{}
		must(t, k8sClient.Get(ctx, client.ObjectKey{Namespace: system, Name: secret}, s))
		certs[string(s.Data["tls.crt"])] = true
		if !bytes.Equal(s.Data["ca.crt"], ca) {
			t.Fatalf("the CA changed")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(certs) < 3 {
		t.Errorf("the serving certificate was renewed %d times in 75 s, want 2", len(certs)-1)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d admissions failed while the certificate was renewed:\n%s", len(failures), admissions, strings.Join(failures, "\n"))
	}
	t.Logf("%d admissions through both replicas, %d certificates, no failure", admissions, len(certs))
	for i, s := range servers {
		if err := s.StartedChecker()(nil); err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
}

func startManager(t *testing.T, mgr ctrl.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
