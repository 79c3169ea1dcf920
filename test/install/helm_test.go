package install_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

func TestHelmLint(t *testing.T) {
	out, err := helm(t, "lint", "--strict", "charts/gate-operator")
	if err != nil {
		t.Fatalf("helm lint --strict charts/gate-operator failed: %v\n%s", err, out)
	}
	out, err = helm(t, "lint", "--strict", "charts/gate-operator", "-f", writeValues(t, customValues))
	if err != nil {
		t.Fatalf("helm lint --strict with non-default values failed: %v\n%s", err, out)
	}
}

func TestHelmTemplateDefaults(t *testing.T) {
	objs := helmTemplate(t)

	wantKinds := []string{
		"ClusterRole", "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "ClusterRoleBinding",
		"CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition",
		"Deployment", "MutatingWebhookConfiguration", "MutatingWebhookConfiguration", "PodDisruptionBudget", "Role", "Role", "Role", "RoleBinding", "RoleBinding", "RoleBinding", "Secret", "Service", "Service", "Service",
		"ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy",
		"ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding",
		"ValidatingWebhookConfiguration", "ValidatingWebhookConfiguration",
	}
	if got := kinds(objs); !slices.Equal(got, wantKinds) {
		t.Fatalf("default values render kinds %v, want %v", got, wantKinds)
	}
	for _, o := range objs {
		if isNamespaced(o) && o.GetNamespace() != namespace {
			t.Errorf("%s %s is in namespace %q, want the release namespace %q", o.GetKind(), o.GetName(), o.GetNamespace(), namespace)
		}
	}

	// The CRDs are the generated ones, plus the keep annotation.
	bases := generatedCRDs(t)
	crds := ofKind(objs, "CustomResourceDefinition")
	if len(crds) != len(bases) {
		t.Fatalf("chart renders %d CRDs, config/crd/bases has %d", len(crds), len(bases))
	}
	for _, crd := range crds {
		base, ok := bases[crd.GetName()]
		if !ok {
			t.Fatalf("chart renders CRD %s, which is not in config/crd/bases", crd.GetName())
		}
		if got := crd.GetAnnotations()["helm.sh/resource-policy"]; got != "keep" {
			t.Errorf("CRD %s: annotation helm.sh/resource-policy = %q, want keep (so helm uninstall keeps users' policies)", crd.GetName(), got)
		}
		if !equality.Semantic.DeepEqual(crd.Object["spec"], base.Object["spec"]) {
			t.Errorf("CRD %s: spec differs from config/crd/bases (run `make chart-sync`)", crd.GetName())
		}
	}

	checkRBAC(t, objs, rbacWant{prefix: "gate-operator", serviceAccount: "gate-operator", metricsAuth: true, webhookCerts: true})
	dep := deployment(t, objs)
	checkManagerPod(t, dep, managerWant{
		replicas:       2,
		image:          defaultImage,
		confirmerImage: defaultConfirmerImage,
		leaderElect:    true,
		resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
		},
	})
	checkAvailability(t, objs, availabilityWant{replicas: 2, pdb: true, maxUnavailable: 1, spread: true})
	checkMetricsService(t, objs, dep)
	checkCanaryService(t, objs, dep)
	if sm := ofKind(objs, "ServiceMonitor"); len(sm) != 0 {
		t.Errorf("ServiceMonitor rendered with serviceMonitor.enabled false (default)")
	}
}

// customValues are non-default values for every switch the chart has.
const customValues = `
replicas: 2
image:
  repository: registry.example.com/gate/operator
  tag: v9.9.9
  pullPolicy: Always
confirmerImage:
  repository: registry.example.com/gate/confirmer
  tag: v9.9.8
crds:
  install: false
serviceMonitor:
  enabled: true
  interval: 15s
  labels:
    release: prometheus
grafanaDashboard:
  enabled: true
  namespace: grafana
  label: grafana.example.com/dashboard
  labelValue: gate
  annotations:
    grafana_folder: Platform
prometheusRule:
  enabled: true
  labels:
    release: prometheus
resources:
  requests:
    cpu: 200m
    memory: 256Mi
  limits:
    cpu: "1"
    memory: 1Gi
manager:
  dnsNamespace: dns
  dnsPodLabels: app=coredns
  resolveMinInterval: 10s
  resolveMaxInterval: 10m
  gateHookPath: /usr/local/bin/gate-hook
  claudeCodeMinimumVersion: 2.1.400
  platformNamespaces: [gate-platform, gate-platform-b]
  extraArgs: ["--zap-log-level=debug"]
serviceAccount:
  name: gate
  annotations:
    example.com/role: gate
podLabels:
  team: platform
webhook:
  timeoutSeconds: 5
  selfManaged:
    caLifetime: 43800h
    certLifetime: 720h
    renewBefore: 240h
    checkInterval: 30m
`

func TestHelmTemplateCustomValues(t *testing.T) {
	objs := helmTemplate(t, "-f", writeValues(t, customValues))

	if crds := ofKind(objs, "CustomResourceDefinition"); len(crds) != 0 {
		t.Errorf("crds.install false still renders %d CRDs", len(crds))
	}
	checkRBAC(t, objs, rbacWant{prefix: "gate-operator", serviceAccount: "gate", metricsAuth: true, webhookCerts: true})
	if sa := find(t, objs, "ServiceAccount", "gate"); sa.GetAnnotations()["example.com/role"] != "gate" {
		t.Errorf("ServiceAccount annotations = %v, want serviceAccount.annotations", sa.GetAnnotations())
	}
	dep := deployment(t, objs)
	checkManagerPod(t, dep, managerWant{
		replicas:       2,
		image:          "registry.example.com/gate/operator:v9.9.9",
		pullPolicy:     corev1.PullAlways,
		confirmerImage: "registry.example.com/gate/confirmer:v9.9.8",
		leaderElect:    true,
		managerFlags: []string{
			"--platform-namespaces=gate-platform,gate-platform-b",
			"--dns-namespace=dns", "--dns-pod-labels=app=coredns",
			"--resolve-min-interval=10s", "--resolve-max-interval=10m",
			"--gate-hook-path=/usr/local/bin/gate-hook",
			"--claude-code-minimum-version=2.1.400",
		},
		webhooks: []string{
			"--webhook-port=9443", "--webhook-certs=self", "--webhook-namespace=" + namespace,
			"--webhook-service=gate-operator-webhook", "--webhook-secret=gate-operator-webhook-cert", "--webhook-configuration=gate-operator",
			"--webhook-ca-lifetime=43800h", "--webhook-cert-lifetime=720h", "--webhook-cert-renew-before=240h", "--webhook-cert-check-interval=30m",
			"--gate-hook-image=registry.example.com/gate/confirmer:v9.9.8",
		},
		extraArgs: []string{"--zap-log-level=debug"},
		resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		},
	})
	if got := dep.Spec.Template.Labels["team"]; got != "platform" {
		t.Errorf("pod label team = %q, want podLabels to be applied", got)
	}
	if got := dep.Spec.Selector.MatchLabels["team"]; got != "" {
		t.Errorf("podLabels leaked into the immutable Deployment selector: %v", dep.Spec.Selector.MatchLabels)
	}
	svc := checkMetricsService(t, objs, dep)

	sms := ofKind(objs, "ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("serviceMonitor.enabled true renders %d ServiceMonitors, want 1", len(sms))
	}
	sm := sms[0]
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetNamespace() != namespace {
		t.Errorf("ServiceMonitor is %s in %q, want monitoring.coreos.com/v1 in %q", sm.GetAPIVersion(), sm.GetNamespace(), namespace)
	}
	if sm.GetLabels()["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v lack serviceMonitor.labels", sm.GetLabels())
	}
	matchLabels, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(matchLabels) == 0 || !labels.SelectorFromSet(matchLabels).Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selector %v does not select the metrics Service (labels %v)", matchLabels, svc.Labels)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("ServiceMonitor has %d endpoints, want 1", len(endpoints))
	}
	ep, _ := endpoints[0].(map[string]any)
	if ep["port"] != "metrics" || ep["path"] != "/metrics" || ep["interval"] != "15s" {
		t.Errorf("ServiceMonitor endpoint = %v, want port metrics, path /metrics, interval 15s", ep)
	}
	// The metrics are served over HTTPS to authorized ServiceAccounts, with a self-signed
	// certificate: Prometheus presents its token and does not verify the certificate.
	if ep["scheme"] != "https" || ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		t.Errorf("ServiceMonitor endpoint = %v, want scheme https with the ServiceAccount token as bearerTokenFile", ep)
	}
	if skip, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify"); !skip {
		t.Errorf("ServiceMonitor endpoint tlsConfig = %v, want insecureSkipVerify (the manager's certificate is self-signed)", ep["tlsConfig"])
	}

	t.Run("metrics.secure false", func(t *testing.T) {
		objs := helmTemplate(t, "--set", "metrics.secure=false", "--set", "serviceMonitor.enabled=true")
		checkRBAC(t, objs, rbacWant{prefix: "gate-operator", serviceAccount: "gate-operator", metricsAuth: false, webhookCerts: true})
		checkManagerPod(t, deployment(t, objs), managerWant{
			replicas: 2, leaderElect: true, image: defaultImage, confirmerImage: defaultConfirmerImage, metricsInsecure: true,
			resources: deployment(t, helmTemplate(t)).Spec.Template.Spec.Containers[0].Resources,
		})
		endpoints, _, _ := unstructured.NestedSlice(ofKind(objs, "ServiceMonitor")[0].Object, "spec", "endpoints")
		if ep, _ := endpoints[0].(map[string]any); ep["scheme"] != "http" || ep["bearerTokenFile"] != nil || ep["tlsConfig"] != nil {
			t.Errorf("ServiceMonitor endpoint with metrics.secure false = %v, want plain http without token or TLS", ep)
		}
	})

	t.Run("images by digest", func(t *testing.T) {
		manager, confirmer := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
		objs := helmTemplate(t, "--set", "image.digest="+manager, "--set", "confirmerImage.digest="+confirmer)
		dep := deployment(t, objs)
		want := "ghcr.io/intutic/gate-confirmer@" + confirmer
		args := dep.Spec.Template.Spec.Containers[0].Args
		if got := dep.Spec.Template.Spec.Containers[0].Image; got != "ghcr.io/intutic/gate-operator@"+manager {
			t.Errorf("manager image %q, want the repository at the digest", got)
		}
		if !slices.Contains(args, "--confirmer-image="+want) || !slices.Contains(args, "--gate-hook-image="+want) {
			t.Errorf("manager args %v, want --confirmer-image and --gate-hook-image %s", args, want)
		}
	})

	t.Run("leaderElection.enabled with one replica", func(t *testing.T) {
		objs := helmTemplate(t, "--set", "replicas=1", "--set", "leaderElection.enabled=true")
		dep := deployment(t, objs)
		if *dep.Spec.Replicas != 1 || !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--leader-elect") {
			t.Errorf("replicas %d, args %v: want 1 replica with --leader-elect", *dep.Spec.Replicas, dep.Spec.Template.Spec.Containers[0].Args)
		}
	})
}

func TestHelmTemplateRejectsInvalidValues(t *testing.T) {
	for _, tc := range []struct {
		name, values, wantInError string
	}{
		{"replicas 0", "replicas: 0\n", "/replicas"},
		{"replicas a string", "replicas: \"2\"\n", "/replicas"},
		{"unknown top-level key", "replica: 2\n", "'replica' not allowed"},
		{"empty image repository", "image:\n  repository: \"\"\n", "/image/repository"},
		{"unknown image key", "image:\n  sha: sha256:0\n", "'sha' not allowed"},
		{"image digest not a sha256 digest", "image:\n  digest: sha256:0\n", "/image/digest"},
		{"confirmer image digest with a tag", "confirmerImage:\n  digest: v1@sha256:0\n", "/confirmerImage/digest"},
		{"empty confirmer image repository", "confirmerImage:\n  repository: \"\"\n", "/confirmerImage/repository"},
		{"crds.install not a boolean", "crds:\n  install: \"yes\"\n", "/crds/install"},
		{"serviceMonitor.enabled not a boolean", "serviceMonitor:\n  enabled: \"true\"\n", "/serviceMonitor/enabled"},
		{"interval not a duration", "manager:\n  resolveMinInterval: soon\n", "/manager/resolveMinInterval"},
		{"image pull policy", "image:\n  pullPolicy: Sometimes\n", "/image/pullPolicy"},
		{"watchNamespaces not a list", "watchNamespaces: agents\n", "/watchNamespaces"},
		{"watchNamespaces not a DNS label", "watchNamespaces: [Agents]\n", "/watchNamespaces/0"},
		{"watchNamespaces twice", "watchNamespaces: [a, a]\n", "/watchNamespaces"},
		{"metrics.secure not a boolean", "metrics:\n  secure: \"false\"\n", "/metrics/secure"},
		{"unknown metrics key", "metrics:\n  port: 8080\n", "'port' not allowed"},
		{"relative gate-hook path", "manager:\n  gateHookPath: bin/gate-hook\n", "/manager/gateHookPath"},
		{"platform namespace not a DNS label", "manager:\n  platformNamespaces: [Gate]\n", "/manager/platformNamespaces/0"},
		{"Claude Code minimum version not a version", "manager:\n  claudeCodeMinimumVersion: latest\n", "/manager/claudeCodeMinimumVersion"},
		{"webhook timeout 0", "webhook:\n  timeoutSeconds: 0\n", "/webhook/timeoutSeconds"},
		{"webhook lifetime not a duration", "webhook:\n  selfManaged:\n    certLifetime: a year\n", "/webhook/selfManaged/certLifetime"},
		{"cert-manager issuer kind", "webhook:\n  certManager:\n    issuerRef: {name: ca, kind: Vault}\n", "/webhook/certManager/issuerRef/kind"},
		{"unknown webhook key", "webhook:\n  failurePolicy: Ignore\n", "'failurePolicy' not allowed"},
		{"budget lets no pod go", "podDisruptionBudget:\n  maxUnavailable: 0\n", "/podDisruptionBudget/maxUnavailable"},
		{"budget as a percentage", "podDisruptionBudget:\n  maxUnavailable: 50%\n", "/podDisruptionBudget/maxUnavailable"},
		{"unknown budget key", "podDisruptionBudget:\n  minAvailable: 1\n", "'minAvailable' not allowed"},
		{"spread when unsatisfiable", "topologySpread:\n  whenUnsatisfiable: Sometimes\n", "/topologySpread/whenUnsatisfiable"},
		{"spread by nothing", "topologySpread:\n  topologyKey: \"\"\n", "/topologySpread/topologyKey"},
		{"dashboard label value with a space", "grafanaDashboard:\n  labelValue: \"a b\"\n", "/grafanaDashboard/labelValue"},
		{"dashboard namespace not a DNS label", "grafanaDashboard:\n  namespace: Grafana\n", "/grafanaDashboard/namespace"},
		{"prometheusRule.enabled not a boolean", "prometheusRule:\n  enabled: \"true\"\n", "/prometheusRule/enabled"},
		{"unknown prometheusRule key", "prometheusRule:\n  interval: 1m\n", "'interval' not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helm(t, "template", release, "charts/gate-operator", "--namespace", namespace, "-f", writeValues(t, tc.values))
			if err == nil {
				t.Fatalf("helm template accepted invalid values %q; output:\n%s", tc.values, head(out, 20))
			}
			if !strings.Contains(out, "values don't meet the specifications of the schema") || !strings.Contains(out, tc.wantInError) {
				t.Fatalf("helm template failed, but not by the values schema naming %q:\n%s", tc.wantInError, out)
			}
		})
	}
}

// TestHelmInstallNotes renders the release notes (helm install --dry-run=client, which needs an
// API server only to learn its version) and checks they say what to apply next. The API server
// is shared: --take-ownership keeps the CRDs the dry-run tests applied for real from failing
// helm's ownership check, whichever test runs first.
func TestHelmInstallNotes(t *testing.T) {
	apiServer(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"default values", nil, []string{
			"installed in the namespace " + namespace,
			"rollout status deployment/gate-operator",
			"Apply a HarnessAgentPolicy",
			"kubectl explain harnessagentpolicy.spec",
			"apply a SessionConfirmer",
			"kubectl explain sessionconfirmer.spec",
			defaultConfirmerImage,
		}},
		// (Not with a ServiceMonitor: helm maps every object against the API server, which has
		// no Prometheus Operator CRDs.)
		{"without CRDs", []string{"--set", "crds.install=false"}, []string{
			"crds.install is false",
			"kubectl explain harnessagentpolicy.spec",
		}},
		{"metrics", nil, []string{
			"Service gate-operator-metrics, port metrics, 8443) are served over HTTPS",
			"bind the ClusterRole\ngate-operator-metrics-reader to your scraper's ServiceAccount",
		}},
		{"metrics.secure false", []string{"--set", "metrics.secure=false"}, []string{
			"8443) are served over plain\nHTTP to anyone",
		}},
		{"watchNamespaces", []string{"--set", "watchNamespaces={a,b}"}, []string{
			"serves only the namespaces a, b",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"install", release, "charts/gate-operator", "--namespace", namespace, "--dry-run=client", "--take-ownership", "--kubeconfig", envKubeconfig}, tc.args...)
			out, err := helm(t, args...)
			if err != nil {
				t.Fatalf("helm %s failed: %v\n%s", strings.Join(args, " "), err, out)
			}
			_, notes, ok := strings.Cut(out, "\nNOTES:\n")
			if !ok {
				t.Fatalf("helm install --dry-run printed no NOTES:\n%s", head(out, 20))
			}
			t.Logf("NOTES:\n%s", notes)
			for _, want := range tc.want {
				if !strings.Contains(notes, want) {
					t.Errorf("NOTES lack %q:\n%s", want, notes)
				}
			}
			if strings.Contains(notes, "<no value>") {
				t.Errorf("NOTES render a missing value:\n%s", notes)
			}
		})
	}
}
