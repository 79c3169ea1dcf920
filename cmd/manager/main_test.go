package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/testutil"
)

// parse runs the manager's flag parsing on args, with a resolver that needs no resolv.conf.
func parse(args ...string) (*settings, error) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return parseFlags(fs, append([]string{"--nameserver=127.0.0.1:53"}, args...))
}

func TestFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"--namespaces=Agents"}, `--namespaces: "Agents" is not a namespace name`},
		{[]string{"--namespaces=agents,,tools"}, `--namespaces: "" is not a namespace name`},
		{[]string{"--namespaces=agents,"}, `--namespaces: "" is not a namespace name`},
		{[]string{"--namespaces=team_a"}, `--namespaces: "team_a" is not a namespace name`},
		{[]string{"--namespaces=" + strings.Repeat("a", 64)}, "--namespaces: "},
		{[]string{"--namespaces=agents,agents"}, `--namespaces: "agents" is listed twice`},
		{[]string{"--platform-namespaces=Gate"}, `--platform-namespaces: "Gate" is not a namespace name`},
		{[]string{"--platform-namespaces=gate,gate"}, `--platform-namespaces: "gate" is listed twice`},
		{[]string{"--namespaces=agents", "--platform-namespaces=gate"}, `--platform-namespaces: "gate" is not served (--namespaces agents)`},
		{[]string{"--gate-hook-path=bin/gate-hook"}, `--gate-hook-path "bin/gate-hook" is not an absolute path`},
		{[]string{"--gate-hook-path="}, `--gate-hook-path "" is not an absolute path`},
		{[]string{"--bootstrap-mount-dir=hooks"}, `--bootstrap-mount-dir "hooks" is not an absolute path`},
		{[]string{"--claude-code-minimum-version=latest"}, `--claude-code-minimum-version: the minimum Claude Code version "latest" is not a version`},
		{[]string{"--claude-code-minimum-version="}, `--claude-code-minimum-version: the minimum Claude Code version "" is not a version`},
		{[]string{"--metrics-cert-dir=" + filepath.Join(t.TempDir(), "missing")}, "--metrics-cert-dir"},
		{[]string{"--dns-pod-labels=kube-dns"}, "--dns-pod-labels"},
		{[]string{"--kube-api-qps=0"}, "--kube-api-qps is 0"},
		{[]string{"--kube-api-qps=50", "--kube-api-burst=0"}, "--kube-api-burst 0 is below 1"},
		{[]string{"--policy-workers=0"}, "--policy-workers 0 is below 1"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			s, err := parse(tc.args...)
			if err == nil {
				t.Fatalf("accepted, with settings %+v", s)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestFlagsAccepted(t *testing.T) {
	s, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	// Secure metrics on 8443, every namespace, the default hook binary.
	if s.metricsAddr != ":8443" || !s.metricsSecure || s.namespaces != nil || s.bootstrap.HookBin != bootstrap.DefaultHookBin {
		t.Errorf("defaults: metrics %q secure %v, namespaces %q, gate-hook %q", s.metricsAddr, s.metricsSecure, s.namespaces, s.bootstrap.HookBin)
	}
	if o := cacheOptions(s.namespaces, false); o.DefaultNamespaces != nil || o.DefaultTransform == nil {
		t.Errorf("without --namespaces the cache is scoped to %v, or keeps managedFields (transform %v)", o.DefaultNamespaces, o.DefaultTransform)
	}
	// No client-side limit (the API server's priority and fairness applies), 16 policy workers.
	if s.apiQPS >= 0 || s.policyWorkers != 16 {
		t.Errorf("defaults: --kube-api-qps %v, --policy-workers %d", s.apiQPS, s.policyWorkers)
	}
	if o := metricsOptions(s); !o.SecureServing || o.FilterProvider == nil {
		t.Errorf("default metrics options serve without TLS or without the authn/authz filter: %+v", o)
	}

	s, err = parse("--namespaces= agents, tools ", "--gate-hook-path=/usr/local/bin/gate-hook", "--metrics-secure=false")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.namespaces, []string{"agents", "tools"}) || s.bootstrap.HookBin != "/usr/local/bin/gate-hook" {
		t.Errorf("namespaces %q, gate-hook %q", s.namespaces, s.bootstrap.HookBin)
	}
	o := cacheOptions(s.namespaces, false)
	if got := slices.Sorted(maps.Keys(o.DefaultNamespaces)); !slices.Equal(got, []string{"agents", "tools"}) {
		t.Errorf("cache namespaces %v, want agents and tools", got)
	}
	// The children's label scoping is kept; its namespaces come from DefaultNamespaces.
	for obj, by := range o.ByObject {
		if by.Label == nil || by.Namespaces != nil {
			t.Errorf("cache for %T: label %v, namespaces %v; want the managed-by label and the default namespaces", obj, by.Label, by.Namespaces)
		}
	}
	if o := metricsOptions(s); o.SecureServing || o.FilterProvider != nil {
		t.Errorf("--metrics-secure=false still serves TLS or filters: %+v", o)
	}

	// The platform namespaces reach the SessionConfirmer webhook; by default there are none.
	if s.platformNamespaces != nil || s.webhooks.PlatformNamespaces != nil {
		t.Errorf("default platform namespaces %q", s.platformNamespaces)
	}
	s, err = parse("--namespaces=agents,gate", "--platform-namespaces=gate")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.platformNamespaces, []string{"gate"}) || !slices.Equal(s.webhooks.PlatformNamespaces, []string{"gate"}) {
		t.Errorf("platform namespaces %q, the webhook's %q", s.platformNamespaces, s.webhooks.PlatformNamespaces)
	}
}

// TestManagerUnderItsOwnRBAC runs the manager as its ServiceAccount with exactly the RBAC of
// config/rbac, its ClusterRole bound in one namespace only (as the chart's watchNamespaces
// does) and --namespaces naming it, behind the ValidatingAdmissionPolicies of
// config/admission-policies (managed-children refuses every writer of its ConfigMaps and
// NetworkPolicies but it). It reconciles the samples there and nothing elsewhere, and
// its metrics endpoint refuses callers without a token (401) or without the right to get
// /metrics (403) and serves one bound to gate-operator-metrics-reader.
func TestManagerUnderItsOwnRBAC(t *testing.T) {
	const (
		served, other = "served", "other"
		hookBin       = "/usr/local/bin/gate-hook"
	)
	logs := &testutil.SyncBuffer{}
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager log:\n%s", logs.String())
		}
	})

	cfg := apiservertest.Start(t, true)
	root, err := apiservertest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = gatev1.AddToScheme(scheme)
	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	clientset := kubernetes.NewForConfigOrDie(cfg)
	ctx := testutil.Context(t, 3*time.Minute)

	// The samples in two namespaces; the manager will serve one.
	env := &localenv.Env{Root: root, Client: admin}
	for _, ns := range []string{other, served} {
		must(t, env.ApplySamples(ctx, localenv.Samples{Namespace: ns, APIKey: "sk-ant-test", WebhookKey: "whsec_dGVzdA==", BaseURL: "https://api.anthropic.invalid", AgentID: "agent_test"}))
	}

	// The manager's RBAC from config/rbac, except the cluster-wide binding of its ClusterRole,
	// which is bound in the served namespace alone.
	must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gate-system"}}))
	for _, o := range rbacManifests(t, root) {
		if o.GetKind() == "ClusterRoleBinding" && o.GetName() == "gate-operator-manager" {
			continue
		}
		must(t, admin.Create(ctx, o))
	}
	must(t, admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "gate-operator-manager"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "gate-operator-manager"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "gate-operator", Namespace: "gate-system"}},
	}))

	// A scraper bound to the metrics-reader ClusterRole, and a ServiceAccount bound to nothing.
	must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}))
	for _, sa := range []string{"prometheus", "nobody"} {
		must(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: sa}}))
	}
	must(t, admin.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-gate-operator-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "gate-operator-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: "monitoring"}},
	}))

	// The admission policies, enforced before the manager starts: the cluster admin itself
	// may not create a ConfigMap labelled as the manager's.
	must(t, apiservertest.InstallAdmissionPolicies(ctx, admin))
	testutil.Eventually(t, time.Minute, func() error {
		err := admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "probe",
			Labels: map[string]string{gatev1.LabelManagedBy: gatev1.ManagedByValue}}}, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "system:serviceaccount:gate-system:gate-operator") {
			return nil
		}
		return fmt.Errorf("the admission policies are not enforced yet: a labelled ConfigMap: %v", err)
	})

	// The manager authenticates as its ServiceAccount, as in a pod.
	mgrCfg := rest.AnonymousClientConfig(cfg)
	mgrCfg.BearerToken = token(t, clientset, "gate-system", "gate-operator")
	port := freePort(t)
	s, err := parse("--namespaces="+served, "--gate-hook-path="+hookBin,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port), "--health-probe-bind-address=0")
	if err != nil {
		t.Fatal(err)
	}
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
	waitFor := func(what string, cond func() (bool, error)) {
		t.Helper()
		for {
			ok, err := cond()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if ok {
				return
			}
			select {
			case <-stopped:
				t.Fatalf("%s: the manager stopped: %v", what, runErr)
			case <-ctx.Done():
				t.Fatalf("%s: %v", what, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}

	t.Run("reconciles the served namespace", func(t *testing.T) {
		p := &gatev1.HarnessAgentPolicy{}
		waitFor("the policy's bundle is rendered", func() (bool, error) {
			err := admin.Get(ctx, client.ObjectKey{Namespace: served, Name: "coding-agents"}, p)
			return err == nil && p.Status.ObservedGeneration == p.Generation &&
				meta.IsStatusConditionTrue(p.Status.Conditions, gatev1.ConditionBootstrapRendered), client.IgnoreNotFound(err)
		})
		// Its hosts do not resolve here (no DNS), so it is not Ready; no child was refused.
		for _, c := range p.Status.Conditions {
			if c.Reason == gatev1.ReasonApplyFailed {
				t.Errorf("condition %s: %s: %s", c.Type, c.Reason, c.Message)
			}
		}
		cm := &corev1.ConfigMap{}
		must(t, admin.Get(ctx, client.ObjectKey{Namespace: served, Name: p.Status.BootstrapConfigMap}, cm))
		must(t, admin.Get(ctx, client.ObjectKey{Namespace: served, Name: "coding-agents-egress"}, &networkingv1.NetworkPolicy{}))
		if !strings.Contains(cm.Data[bootstrap.KeyHookScript], hookBin) || strings.Contains(cm.Data[bootstrap.KeyHookScript], bootstrap.DefaultHookBin) {
			t.Errorf("the hook wrapper does not run --gate-hook-path %s:\n%s", hookBin, cm.Data[bootstrap.KeyHookScript])
		}

		// The confirmer's children, its Role included: the manager may create a Role granting
		// Leases only because it holds those rights there itself.
		sc := &gatev1.SessionConfirmer{}
		waitFor("the SessionConfirmer is reconciled", func() (bool, error) {
			err := admin.Get(ctx, client.ObjectKey{Namespace: served, Name: "coding-agents"}, sc)
			return err == nil && sc.Status.ObservedGeneration == sc.Generation, client.IgnoreNotFound(err)
		})
		for _, child := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &policyv1.PodDisruptionBudget{}} {
			if err := admin.Get(ctx, client.ObjectKey{Namespace: served, Name: "coding-agents-confirmer"}, child); err != nil {
				t.Errorf("%T coding-agents-confirmer: %v", child, err)
			}
		}
	})

	t.Run("ignores the other namespace", func(t *testing.T) {
		p := &gatev1.HarnessAgentPolicy{}
		must(t, admin.Get(ctx, client.ObjectKey{Namespace: other, Name: "coding-agents"}, p))
		if p.Status.ObservedGeneration != 0 || len(p.Status.Conditions) > 0 {
			t.Errorf("the policy in %s was reconciled: %+v", other, p.Status)
		}
		for _, child := range []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coding-agents-bootstrap"}}, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coding-agents-confirmer"}}} {
			if err := admin.Get(ctx, client.ObjectKey{Namespace: other, Name: child.GetName()}, child); !apierrors.IsNotFound(err) {
				t.Errorf("%T %s/%s: %v, want not found", child, other, child.GetName(), err)
			}
		}
	})

	t.Run("metrics need a token allowed to get /metrics", func(t *testing.T) {
		url := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
		httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			// The certificate is self-signed, generated at start-up.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
		}}
		get := func(bearer string) (int, string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return 0, "", err
			}
			if bearer != "" {
				req.Header.Set("Authorization", "Bearer "+bearer)
			}
			resp, err := httpc.Do(req)
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body), err
		}
		waitFor("the metrics endpoint answers", func() (bool, error) {
			_, _, err := get("")
			return err == nil, nil
		})
		for _, tc := range []struct {
			name, token string
			want        int // 0: any refusal
		}{
			{"no token", "", http.StatusUnauthorized},
			// controller-runtime's filter answers 500 "Authentication failed" here: the token
			// authenticator reports a token the TokenReview rejects as an error, not as
			// unauthenticated. It is refused all the same.
			{"a token the API server does not know", "not-a-token", 0},
			{"a ServiceAccount without the right", token(t, clientset, "monitoring", "nobody"), http.StatusForbidden},
			{"a ServiceAccount bound to gate-operator-metrics-reader", token(t, clientset, "monitoring", "prometheus"), http.StatusOK},
		} {
			code, body, err := get(tc.token)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if (tc.want != 0 && code != tc.want) || (tc.want == 0 && code < 400) {
				t.Errorf("%s: HTTP %d, want %d (%s)", tc.name, code, tc.want, strings.TrimSpace(body))
			}
			if served := strings.Contains(body, "controller_runtime_reconcile_total"); served != (code == http.StatusOK) {
				t.Errorf("%s: HTTP %d, metrics in the body: %v", tc.name, code, served)
			}
		}
		// Plain HTTP gets no metrics.
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("plain HTTP was served metrics")
			}
		}
	})
}

// rbacManifests reads the objects config/rbac/kustomization.yaml lists.
func rbacManifests(t *testing.T, root string) []*unstructured.Unstructured {
	t.Helper()
	dir := filepath.Join(root, "config", "rbac")
	var k struct {
		Resources []string `json:"resources"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	must(t, err)
	must(t, yaml.Unmarshal(data, &k))
	return manifests(t, dir, k.Resources...)
}

// token issues a ServiceAccount token (TokenRequest), as kubelet does for a pod.
func token(t *testing.T, c kubernetes.Interface, namespace, name string) string {
	t.Helper()
	tr, err := c.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
