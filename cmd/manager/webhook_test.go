package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/testutil"
	"github.com/intutic/gate-operator/internal/webhook"
	"github.com/intutic/gate-operator/internal/webhook/webhooktest"
)

func TestWebhookFlagsRefused(t *testing.T) {
	self := []string{"--webhook-port=9443", "--webhook-namespace=gate-system"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--webhook-port=70000"}, "--webhook-port 70000 is not a port"},
		{[]string{"--webhook-port=9443"}, "--webhook-namespace is required with --webhook-certs=self"},
		{append(self, "--webhook-certs=manual"), `--webhook-certs "manual" is not self or external`},
		{append(self, "--webhook-cert-dir=certs"), `--webhook-cert-dir "certs" is not an absolute path`},
		{append(self, "--webhook-secret=Cert"), `--webhook-secret "Cert"`},
		{append(self, "--webhook-cert-dns-names=localhost,not a name"), `--webhook-cert-dns-names: "not a name"`},
		{append(self, "--gate-hook-path=/usr/local/bin/hook"), `--gate-hook-path "/usr/local/bin/hook" must end in /gate-hook`},
		{append(self, "--webhook-cert-lifetime=1h", "--webhook-cert-renew-before=2h"), "--webhook-cert-lifetime (1h0m0s) must be longer than --webhook-cert-renew-before (2h0m0s)"},
		{append(self, "--webhook-cert-renew-before=30m"), "--webhook-cert-renew-before (30m0s) must be longer than --webhook-cert-check-interval (1h0m0s)"},
		{append(self, "--webhook-ca-lifetime=100h", "--webhook-cert-lifetime=200h", "--webhook-cert-renew-before=10h"), "--webhook-ca-lifetime (100h0m0s) must be longer than --webhook-cert-lifetime (200h0m0s)"},
		{append(self, "--webhook-shutdown-delay=-1s"), "--webhook-shutdown-delay -1s is negative"},
		{append(self, "--webhook-shutdown-delay=30s"), "--webhook-shutdown-delay 30s is not below the manager's 30s shutdown timeout"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			s, err := parse(tc.args...)
			if err == nil {
				t.Fatalf("accepted, with settings %+v", s.webhooks)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestWebhookFlagsAccepted(t *testing.T) {
	s, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if s.webhooks.Port != 0 {
		t.Errorf("webhooks are served by default on %d; the installs turn them on", s.webhooks.Port)
	}
	// With no webhooks, --gate-hook-path may be named anything, as before.
	if _, err := parse("--gate-hook-path=/usr/local/bin/hook"); err != nil {
		t.Error(err)
	}

	s, err = parse("--webhook-port=9443", "--webhook-namespace=gate-system", "--confirmer-image=registry.example/confirmer:1",
		"--webhook-cert-dns-names=localhost, gate.example")
	if err != nil {
		t.Fatal(err)
	}
	w := s.webhooks
	if w.Certs.Mode != webhook.CertsSelf || w.Certs.SecretName != "gate-operator-webhook-cert" || w.Certs.ServiceName != "gate-operator-webhook" ||
		w.Certs.ConfigurationName != "gate-operator" || w.Certs.Dir != "/etc/gate-operator/webhook-certs" {
		t.Errorf("defaults: %+v", w.Certs)
	}
	if w.GateHookImage != "registry.example/confirmer:1" {
		t.Errorf("the hook image %q is not --confirmer-image by default", w.GateHookImage)
	}
	if !slices.Equal(w.Certs.ExtraDNSNames, []string{"localhost", "gate.example"}) {
		t.Errorf("extra DNS names %q", w.Certs.ExtraDNSNames)
	}
	if w.Bootstrap.HookBin != s.bootstrap.HookBin || w.Bootstrap.MountDir != s.bootstrap.MountDir {
		t.Errorf("the webhooks do not get the bundle options: %+v, want %+v", w.Bootstrap, s.bootstrap)
	}
	// A replica being deleted drains for 5 s, inside the installs' 30 s grace period.
	if w.ShutdownDelay != 5*time.Second {
		t.Errorf("the webhook shutdown delay is %s by default, want 5s", w.ShutdownDelay)
	}

	s, err = parse("--webhook-port=9443", "--webhook-certs=external", "--gate-hook-image=registry.example/hook:1")
	if err != nil {
		t.Fatal(err)
	}
	if s.webhooks.Certs.Mode != webhook.CertsExternal || s.webhooks.GateHookImage != "registry.example/hook:1" {
		t.Errorf("external: %+v", s.webhooks)
	}

	// The NetworkPolicy webhook lets the controller's DNS pods be reached, and judges only where
	// the manager reads cluster policies (it serves every namespace).
	s, err = parse("--webhook-port=9443", "--webhook-certs=external", "--namespaces=agents", "--dns-namespace=dns", "--dns-pod-labels=app=coredns")
	if err != nil {
		t.Fatal(err)
	}
	if w := s.webhooks; w.DNS.Namespace != "dns" || !maps.Equal(w.DNS.Labels, map[string]string{"app": "coredns"}) || !slices.Equal(w.Namespaces, []string{"agents"}) {
		t.Errorf("the webhooks' DNS pods %+v and namespaces %q, want --dns-namespace, --dns-pod-labels and --namespaces", w.DNS, w.Namespaces)
	}
}

// TestManagerServesWebhooksUnderItsOwnRBAC runs the manager as its ServiceAccount with exactly
// the RBAC of config/rbac and config/webhook, the empty Secret of config/webhook and its
// webhook configurations (pointed at the process through localhost, since there is no Service
// here), with kubelet's part played for the mounted Secret. The manager fills the Secret,
// injects the CA, and the API server's calls reach it: a broken rule is refused with its path
// and a labelled pod is injected.
func TestManagerServesWebhooksUnderItsOwnRBAC(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager log:\n%s", logs.String())
		}
	})
	cfg := apiservertest.Start(t, true)
	root, err := apiservertest.RepoRoot()
	must(t, err)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = gatev1.AddToScheme(scheme)
	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	must(t, err)
	ctx := testutil.Context(t, 3*time.Minute)

	must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gate-system"}}))
	objs := rbacManifests(t, root)
	objs = append(objs, manifests(t, filepath.Join(root, "config", "webhook"), "rbac.yaml", "secret.yaml")...)
	// The egress canary Service, whose ClusterIP the pod webhook reads (under the manager's Role
	// for it) and writes into the injected egress-wait.
	objs = append(objs, manifests(t, filepath.Join(root, "config", "manager"), "egress-canary-service.yaml")...)
	for _, o := range objs {
		must(t, admin.Create(ctx, o))
	}
	canary := &corev1.Service{}
	must(t, admin.Get(ctx, client.ObjectKey{Namespace: "gate-system", Name: "gate-operator-egress-canary"}, canary))
	port := freePort(t)
	for _, o := range manifests(t, filepath.Join(root, "config", "webhook"), "webhooks.yaml") {
		webhooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, w := range webhooks {
			cc := w.(map[string]any)["clientConfig"].(map[string]any)
			svc := cc["service"].(map[string]any)
			cc["url"] = fmt.Sprintf("https://localhost:%d%s", port, svc["path"])
			delete(cc, "service")
		}
		must(t, unstructured.SetNestedSlice(o.Object, webhooks, "webhooks"))
		must(t, admin.Create(ctx, o))
	}

	certDir := t.TempDir()
	go webhooktest.MountSecret(ctx, t, admin, client.ObjectKey{Namespace: "gate-system", Name: "gate-operator-webhook-cert"}, certDir)
	mgrCfg := rest.AnonymousClientConfig(cfg)
	mgrCfg.BearerToken = token(t, kubernetes.NewForConfigOrDie(cfg), "gate-system", "gate-operator")
	s, err := parse("--metrics-bind-address=0", "--health-probe-bind-address=0",
		fmt.Sprintf("--webhook-port=%d", port), "--webhook-namespace=gate-system", "--webhook-cert-dir="+certDir,
		"--webhook-cert-dns-names=localhost", "--gate-hook-image=registry.example/gate-confirmer:test")
	must(t, err)
	s.webhooks.Host = "127.0.0.1"
	s.rerun = true // TestManagerUnderItsOwnRBAC runs the manager in this process too
	runCtx, stop := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	var runErr error
	go func() {
		defer close(stopped)
		runErr = run(runCtx, mgrCfg, s)
	}()
	t.Cleanup(func() {
		stop()
		<-stopped
		if runErr != nil {
			t.Errorf("manager: %v", runErr)
		}
	})

	secret := &corev1.Secret{}
	testutil.Eventually(t, time.Minute, func() error {
		select {
		case <-stopped:
			t.Fatalf("the manager stopped: %v", runErr)
		default:
		}
		v := &admissionregv1.ValidatingWebhookConfiguration{}
		m := &admissionregv1.MutatingWebhookConfiguration{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "gate-system", Name: "gate-operator-webhook-cert"}, secret); err != nil {
			return err
		}
		if err := admin.Get(ctx, client.ObjectKey{Name: "gate-operator"}, v); err != nil {
			return err
		}
		if err := admin.Get(ctx, client.ObjectKey{Name: "gate-operator"}, m); err != nil {
			return err
		}
		ca := secret.Data["ca.crt"]
		var bundles [][]byte
		for _, w := range v.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
		for _, w := range m.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
		for _, b := range bundles {
			if len(ca) == 0 || !bytes.Equal(b, ca) {
				return errors.New("the CA is not in every webhook yet")
			}
		}
		return nil
	})

	must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}))
	policy := &gatev1.HarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "coding-agents"},
		Spec: gatev1.HarnessAgentPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{gatev1.LabelPolicy: "coding-agents"}},
			Rules:       []gatev1.Rule{{Name: "typo", When: "inptu.command == 'x'", Action: gatev1.ActionBlock, Reason: "typo"}},
		},
	}
	// The webhook serves once the certificate is mounted; until then the policy webhook fails
	// open, so wait for the refusal.
	testutil.Eventually(t, time.Minute, func() error {
		err := admin.Create(ctx, policy.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "spec.rules[0].when: ") {
			return fmt.Errorf("a broken policy: %v", err)
		}
		return nil
	})
	policy.Spec.Rules[0].When = "input.command == 'x'"
	must(t, admin.Create(ctx, policy))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "agent", Labels: map[string]string{gatev1.LabelPolicy: "coding-agents"}},
		Spec:       corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1"}}},
	}
	must(t, admin.Create(ctx, pod))
	if len(pod.Spec.InitContainers) != 3 || pod.Spec.InitContainers[0].Image != "registry.example/gate-confirmer:test" || pod.Spec.InitContainers[1].Command[0] != "/egress-wait" ||
		pod.Spec.InitContainers[2].Command[0] != "/gate-agent" || pod.Spec.InitContainers[2].Image != "registry.example/gate-confirmer:test" || len(pod.Spec.Containers[0].VolumeMounts) != 7 {
		t.Errorf("the pod is not injected:\n%+v", pod.Spec)
	}
	if want := []string{"/egress-wait", "--control", net.JoinHostPort(canary.Spec.ClusterIP, "9444"), "--denied", net.JoinHostPort(canary.Spec.ClusterIP, "9445"), "--timeout", "60s"}; !slices.Equal(pod.Spec.InitContainers[1].Command, want) {
		t.Errorf("egress-wait command %q, want %q (the canary Service's ClusterIP)", pod.Spec.InitContainers[1].Command, want)
	}
	approveUnderManagerRBAC(ctx, t, admin, cfg, scheme)
	judgeNetworkPoliciesUnderManagerRBAC(ctx, t, admin)
	if strings.Contains(logs.String(), string(secret.Data["tls.key"])) || strings.Contains(logs.String(), string(secret.Data["ca.key"])) {
		t.Errorf("a private key is in the manager's log")
	}
}

// approveUnderManagerRBAC approves a ToolApproval as a cluster admin: the decision webhook, run
// under the manager's RBAC, records the decider and asks the API server whether they may approve
// (a LocalSubjectAccessReview the manager must be allowed to create).
func approveUnderManagerRBAC(ctx context.Context, t *testing.T, admin client.Client, cfg *rest.Config, scheme *runtime.Scheme) {
	t.Helper()
	ta := &gatev1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "held"},
		Spec: gatev1.ToolApprovalSpec{
			Surface: gatev1.SurfaceWorkflow, Policy: "coding-agents", ToolUseID: "call_1", Tool: "deployService",
			Input: gatev1.ToolApprovalInput{Size: 2, SHA256: strings.Repeat("0a", 32)}, ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour)),
		},
	}
	must(t, admin.Create(ctx, ta))
	asAdmin := rest.CopyConfig(cfg)
	asAdmin.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{"system:masters"}}
	alice, err := client.New(asAdmin, client.Options{Scheme: scheme})
	must(t, err)
	ta.Status.State = gatev1.ApprovalApproved
	ta.Status.Conditions = []metav1.Condition{{Type: gatev1.ConditionApproved, Status: metav1.ConditionTrue, Reason: "ApprovedByUser", LastTransitionTime: metav1.Now()}}
	ta.Status.Decision = &gatev1.ToolApprovalDecision{User: "someone else"}
	must(t, alice.Status().Update(ctx, ta))
	if d := ta.Status.Decision; d == nil || d.User != "alice" || d.Time == nil {
		t.Errorf("the approval's decision %+v does not record alice", d)
	}
}

// judgeNetworkPoliciesUnderManagerRBAC: the NetworkPolicy webhook, run under the manager's
// RBAC, reads the cluster policies, the namespace and its pods: a NetworkPolicy opening
// 0.0.0.0/0 to every pod under a ceiling is refused for the ceiling, not for a read it may not
// make, and one of pods the ceiling does not govern is admitted.
func judgeNetworkPoliciesUnderManagerRBAC(ctx context.Context, t *testing.T, admin client.Client) {
	t.Helper()
	must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ceiling", Labels: map[string]string{"egress": "ceiling"}}}))
	must(t, admin.Create(ctx, &gatev1.ClusterHarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "egress-ceiling"},
		Spec: gatev1.ClusterHarnessAgentPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"egress": "ceiling"}},
			PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"tier": "sandbox"}},
			Egress:            &gatev1.EgressSpec{AllowedCIDRs: []gatev1.CIDR{"203.0.113.0/24"}},
		},
	}))
	openAll := func(name string, pods map[string]string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ceiling", Name: name},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: pods},
				Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}}}},
			},
		}
	}
	if err := admin.Create(ctx, openAll("every-pod", nil)); err == nil || !strings.Contains(err.Error(), "beyond the egress ceiling of ClusterHarnessAgentPolicy egress-ceiling") {
		t.Errorf("0.0.0.0/0 for every pod under a ceiling: %v, want refused for the ceiling", err)
	}
	if err := admin.Create(ctx, openAll("web", map[string]string{"app": "web"})); err != nil {
		t.Errorf("0.0.0.0/0 for pods the ceiling does not govern (the manager lists the namespace's pods): %v", err)
	}
}

// manifests reads the objects of some YAML files in dir.
func manifests(t *testing.T, dir string, files ...string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(dir, file))
		must(t, err)
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			o := &unstructured.Unstructured{}
			if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(o.Object) > 0 {
				objs = append(objs, o)
			}
		}
	}
	return objs
}
