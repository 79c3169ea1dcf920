package install_test

// These tests prove the two ways of installing gate-operator: the Helm chart
// (charts/gate-operator) and the kustomize tree (config/default). Both are rendered, checked for
// the things that matter (CRDs, RBAC, the restricted pod, the manager's flags), and applied with
// a server-side dry run to a real kube-apiserver (envtest), so the API server's own validation,
// defaulting and PodSecurity admission judge them. The chart's generated files are also proved
// to be in sync with config/ (hack/sync-chart).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/intutic/gate-operator/internal/apiservertest"
)

const (
	helmVersion = "v3.22.0"
	helmPackage = "helm.sh/helm/v3/cmd/helm"
	release     = "gate-operator"
	namespace   = "gate-system"

	defaultImage          = "ghcr.io/intutic/gate-operator:v0.1.0"
	defaultConfirmerImage = "ghcr.io/intutic/gate-confirmer:v0.1.0"
)

var (
	// root is the repository root; tests run in test/install.
	root string

	helmOnce sync.Once
	helmErr  error

	inputsOnce sync.Once
	inputsErr  error

	envOnce       sync.Once
	env           *envtest.Environment
	envClient     client.Client
	envKubeconfig string // a kubeconfig file for envtest, for helm
	envErr        error
	warnings      = &warningCollector{}
)

func TestMain(m *testing.M) {
	var err error
	root, err = filepath.Abs(filepath.Join("..", ".."))
	if err == nil {
		_, err = os.Stat(filepath.Join(root, "go.mod"))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "finding the repository root from %s: %v\n", filepath.Join("..", ".."), err)
		os.Exit(1)
	}
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}
	if envKubeconfig != "" {
		_ = os.RemoveAll(filepath.Dir(envKubeconfig))
	}
	os.Exit(code)
}

// readInputs reads every file helm, kubectl and hack/sync-chart read on the tests' behalf.
// `go test` caches a passing result until a file the test process itself opened changes; the
// subprocesses' reads are invisible to it, so without this an edited chart template could
// still report the cached pass. It must run inside m.Run (where the test log is recorded), so
// run calls it before the first subprocess.
func readInputs() error {
	for _, dir := range []string{"charts", "config", filepath.Join("hack", "sync-chart")} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			_, err = os.ReadFile(path)
			return err
		})
		if err != nil {
			return err
		}
	}
	for _, file := range []string{"hack/sync-chart.sh", "hack/install-tool.sh", "bin/helm.version"} {
		_, _ = os.Stat(filepath.Join(root, file)) // may not exist yet
		_, _ = os.ReadFile(filepath.Join(root, file))
	}
	return nil
}

// ---------------------------------------------------------------------------------------------
// The chart

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
		"ClusterRole", "ClusterRoleBinding",
		"CustomResourceDefinition", "CustomResourceDefinition",
		"Deployment", "Role", "RoleBinding", "Service", "ServiceAccount",
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

	checkRBAC(t, objs, "gate-operator-manager", "gate-operator")
	dep := deployment(t, objs, "gate-operator")
	checkManagerPod(t, dep, managerWant{
		replicas:       1,
		image:          defaultImage,
		confirmerImage: defaultConfirmerImage,
		leaderElect:    false,
		resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
		},
	})
	checkMetricsService(t, objs, dep)
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
  extraArgs: ["--zap-log-level=debug"]
serviceAccount:
  name: gate
  annotations:
    example.com/role: gate
podLabels:
  team: platform
`

func TestHelmTemplateCustomValues(t *testing.T) {
	objs := helmTemplate(t, "-f", writeValues(t, customValues))

	if crds := ofKind(objs, "CustomResourceDefinition"); len(crds) != 0 {
		t.Errorf("crds.install false still renders %d CRDs", len(crds))
	}
	checkRBAC(t, objs, "gate-operator-manager", "gate")
	if sa := find(t, objs, "ServiceAccount", "gate"); sa.GetAnnotations()["example.com/role"] != "gate" {
		t.Errorf("ServiceAccount annotations = %v, want serviceAccount.annotations", sa.GetAnnotations())
	}
	dep := deployment(t, objs, "gate-operator")
	checkManagerPod(t, dep, managerWant{
		replicas:       2,
		image:          "registry.example.com/gate/operator:v9.9.9",
		pullPolicy:     corev1.PullAlways,
		confirmerImage: "registry.example.com/gate/confirmer:v9.9.8",
		leaderElect:    true,
		extraArgs: []string{
			"--dns-namespace=dns", "--dns-pod-labels=app=coredns",
			"--resolve-min-interval=10s", "--resolve-max-interval=10m", "--zap-log-level=debug",
		},
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

	t.Run("leaderElection.enabled with one replica", func(t *testing.T) {
		objs := helmTemplate(t, "--set", "leaderElection.enabled=true")
		dep := deployment(t, objs, "gate-operator")
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
		{"unknown image key", "image:\n  digest: sha256:0\n", "'digest' not allowed"},
		{"empty confirmer image repository", "confirmerImage:\n  repository: \"\"\n", "/confirmerImage/repository"},
		{"crds.install not a boolean", "crds:\n  install: \"yes\"\n", "/crds/install"},
		{"serviceMonitor.enabled not a boolean", "serviceMonitor:\n  enabled: \"true\"\n", "/serviceMonitor/enabled"},
		{"interval not a duration", "manager:\n  resolveMinInterval: soon\n", "/manager/resolveMinInterval"},
		{"image pull policy", "image:\n  pullPolicy: Sometimes\n", "/image/pullPolicy"},
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
// API server only to learn its version) and checks they say what to apply next.
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"install", release, "charts/gate-operator", "--namespace", namespace, "--dry-run=client", "--kubeconfig", envKubeconfig}, tc.args...)
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

// TestChartInSync regenerates the chart's derived files into a scratch chart and compares them
// with the committed ones: a CRD or RBAC change without `make chart-sync` fails here.
func TestChartInSync(t *testing.T) {
	scratch := t.TempDir()
	if out, err := run(t, root, "go", "run", "./hack/sync-chart", "-config", "config", "-chart", scratch); err != nil {
		t.Fatalf("go run ./hack/sync-chart failed: %v\n%s", err, out)
	}
	chart := filepath.Join(root, "charts", "gate-operator")
	want := generatedFiles(t, scratch)
	got := generatedFiles(t, chart)
	if len(want) < 3 {
		t.Fatalf("hack/sync-chart generated only %v", keys(want))
	}
	if !slices.Equal(keys(got), keys(want)) {
		t.Fatalf("charts/gate-operator is stale: it has the generated files %v, hack/sync-chart generates %v; run `make chart-sync`", keys(got), keys(want))
	}
	for _, name := range keys(want) {
		if !bytes.Equal(got[name], want[name]) {
			t.Errorf("charts/gate-operator/%s is stale; run `make chart-sync`. First difference:\n%s", name, firstDifference(got[name], want[name]))
		}
		if !bytes.HasPrefix(got[name], []byte("# Code generated by `make chart-sync`")) {
			t.Errorf("charts/gate-operator/%s does not start with the generated-file comment", name)
		}
	}
}

// TestSyncChartRejectsTemplateDelimiters: a CRD whose text contains "{{" would be parsed by Helm
// as a template action; the sync program must refuse it rather than write a broken chart.
func TestSyncChartRejectsTemplateDelimiters(t *testing.T) {
	config := filepath.Join(t.TempDir(), "config")
	for _, dir := range []string{"crd/bases", "rbac"} {
		if err := os.MkdirAll(filepath.Join(config, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	role, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(config, "rbac", "role.yaml"), string(role))
	writeFile(t, filepath.Join(config, "crd", "bases", "example.com_widgets.yaml"), `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        description: 'A widget, templated as {{ .Name }}.'
        type: object
`)
	chart := t.TempDir()
	out, err := run(t, root, "go", "run", "./hack/sync-chart", "-config", config, "-chart", chart)
	if err == nil {
		t.Fatalf("hack/sync-chart accepted a CRD containing {{; output:\n%s", out)
	}
	if !strings.Contains(out, "template delimiter") {
		t.Fatalf("hack/sync-chart failed, but not naming the template delimiter:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(chart, "templates", "crds", "example.com_widgets.yaml")); err == nil {
		t.Fatalf("hack/sync-chart wrote the CRD it refused")
	}
}

// ---------------------------------------------------------------------------------------------
// Server-side dry runs

func TestHelmManifestsServerSideDryRun(t *testing.T) {
	c := apiServer(t)
	// The chart does not create its release namespace: `helm install --namespace` does (with
	// --create-namespace). Create it for real, as restricted as config/default's.
	applyForReal(t, c, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": namespace, "labels": map[string]any{
			"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
		}},
	}})
	t.Run("default values", func(t *testing.T) {
		dryRunAll(t, c, helmTemplate(t))
	})
	t.Run("non-default values", func(t *testing.T) {
		objs := helmTemplate(t, "-f", writeValues(t, customValues))
		var rest []*unstructured.Unstructured
		for _, o := range objs {
			// No Prometheus Operator CRDs in this API server.
			if o.GetKind() != "ServiceMonitor" {
				rest = append(rest, o)
			}
		}
		if len(rest) != len(objs)-1 {
			t.Fatalf("expected exactly one ServiceMonitor to leave out, left %d of %d", len(rest), len(objs))
		}
		dryRunAll(t, c, rest)
	})
}

func TestKustomizeServerSideDryRun(t *testing.T) {
	objs := kustomize(t)
	c := apiServer(t)
	dryRunAll(t, c, objs)

	// The PodSecurity check in dryRunAll has teeth: the same Deployment without its security
	// settings draws a warning from the restricted namespace.
	dep := find(t, objs, "Deployment", "gate-operator").DeepCopy()
	unstructured.RemoveNestedField(dep.Object, "spec", "template", "spec", "securityContext")
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	delete(containers[0].(map[string]any), "securityContext")
	if err := unstructured.SetNestedSlice(dep.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	warnings.reset()
	if err := dryRun(testContext(t), c, dep); err != nil {
		t.Fatalf("dry-run of the insecure Deployment: %v", err)
	}
	if w := warnings.reset(); !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "PodSecurity") }) {
		t.Fatalf("a Deployment without securityContext in the restricted namespace drew no PodSecurity warning (got %q): the warning check proves nothing", w)
	}
}

// TestKustomizeMatchesChartDefaults: config/default installs what the chart installs with its
// default values (release gate-operator in gate-system): the same CRDs, RBAC rules and pod.
func TestKustomizeMatchesChartDefaults(t *testing.T) {
	kobjs := kustomize(t)
	hobjs := helmTemplate(t)

	if ns := find(t, kobjs, "Namespace", namespace); ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s labels %v: want pod-security.kubernetes.io/enforce=restricted", namespace, ns.GetLabels())
	}
	for _, o := range kobjs {
		if isNamespaced(o) && o.GetNamespace() != namespace {
			t.Errorf("kustomize: %s %s is in namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), namespace)
		}
	}
	bases := generatedCRDs(t)
	kcrds := ofKind(kobjs, "CustomResourceDefinition")
	if len(kcrds) != len(bases) {
		t.Errorf("config/default installs %d CRDs, config/crd/bases has %d: list every base in config/crd/kustomization.yaml", len(kcrds), len(bases))
	}
	for _, crd := range kcrds {
		if base, ok := bases[crd.GetName()]; !ok || !equality.Semantic.DeepEqual(crd.Object, base.Object) {
			t.Errorf("kustomize CRD %s differs from config/crd/bases", crd.GetName())
		}
	}
	checkRBAC(t, kobjs, "gate-operator-manager", "gate-operator")

	kdep := deployment(t, kobjs, "gate-operator")
	hdep := deployment(t, hobjs, "gate-operator")
	checkManagerPod(t, kdep, managerWant{
		replicas: 1, image: defaultImage, confirmerImage: defaultConfirmerImage,
		resources: hdep.Spec.Template.Spec.Containers[0].Resources,
	})
	if !equality.Semantic.DeepEqual(kdep.Spec.Template.Spec, hdep.Spec.Template.Spec) {
		t.Errorf("config/manager/manager.yaml pod spec differs from the chart's default:\nkustomize:\n%s\nhelm:\n%s", toYAML(t, kdep.Spec.Template.Spec), toYAML(t, hdep.Spec.Template.Spec))
	}
	ksvc := checkMetricsService(t, kobjs, kdep)
	hsvc := checkMetricsService(t, hobjs, hdep)
	if !equality.Semantic.DeepEqual(ksvc.Spec.Ports, hsvc.Spec.Ports) || ksvc.Name != hsvc.Name {
		t.Errorf("metrics Service differs: kustomize %s %v, helm %s %v", ksvc.Name, ksvc.Spec.Ports, hsvc.Name, hsvc.Spec.Ports)
	}
	krole := typed[rbacv1.Role](t, find(t, kobjs, "Role", "gate-operator-leader-election"))
	hrole := typed[rbacv1.Role](t, find(t, hobjs, "Role", "gate-operator-leader-election"))
	if !equality.Semantic.DeepEqual(krole.Rules, hrole.Rules) {
		t.Errorf("leader-election Role rules differ: kustomize %v, helm %v", krole.Rules, hrole.Rules)
	}
}

// ---------------------------------------------------------------------------------------------
// Checks shared by the chart and kustomize tests

type managerWant struct {
	replicas       int32
	image          string
	pullPolicy     corev1.PullPolicy // empty: IfNotPresent
	confirmerImage string
	leaderElect    bool
	extraArgs      []string
	resources      corev1.ResourceRequirements
}

func checkManagerPod(t *testing.T, dep *appsv1.Deployment, want managerWant) {
	t.Helper()
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != want.replicas {
		t.Errorf("Deployment replicas = %v, want %d", dep.Spec.Replicas, want.replicas)
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("Deployment selector %v does not select its pod template labels %v (%v)", dep.Spec.Selector, dep.Spec.Template.Labels, err)
	}
	pod := dep.Spec.Template.Spec
	if pod.ServiceAccountName == "" {
		t.Errorf("pod has no serviceAccountName")
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("pod securityContext.runAsNonRoot is not true: %+v", psc)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext.seccompProfile is not RuntimeDefault: %+v", psc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("pod has %d containers, want 1 (manager)", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Name != "manager" || c.Image != want.image {
		t.Errorf("container %s runs %q, want manager running %q", c.Name, c.Image, want.image)
	}
	wantPull := want.pullPolicy
	if wantPull == "" {
		wantPull = corev1.PullIfNotPresent
	}
	if c.ImagePullPolicy != wantPull {
		t.Errorf("imagePullPolicy = %q, want %q", c.ImagePullPolicy, wantPull)
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Errorf("manager container has no securityContext")
	default:
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("allowPrivilegeEscalation is not false: %v", sc.AllowPrivilegeEscalation)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("readOnlyRootFilesystem is not true: %v", sc.ReadOnlyRootFilesystem)
		}
		if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("container runAsNonRoot is not true: %v", sc.RunAsNonRoot)
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
			t.Errorf("capabilities = %+v, want drop [ALL] and add nothing", sc.Capabilities)
		}
		if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("container seccompProfile is not RuntimeDefault: %+v", sc.SeccompProfile)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("container is privileged")
		}
	}
	checkProbe(t, "liveness", c.LivenessProbe, "/healthz")
	checkProbe(t, "readiness", c.ReadinessProbe, "/readyz")
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 8080 || ports["health"] != 8081 {
		t.Errorf("container ports %v, want metrics 8080 and health 8081", ports)
	}

	wantArgs := []string{"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--confirmer-image=" + want.confirmerImage}
	if want.leaderElect {
		wantArgs = append(wantArgs, "--leader-elect")
	}
	wantArgs = append(wantArgs, want.extraArgs...)
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("manager args = %q, want %q", c.Args, wantArgs)
	}
	if !equality.Semantic.DeepEqual(c.Resources, want.resources) {
		t.Errorf("manager resources = %v, want %v", c.Resources, want.resources)
	}
}

func checkProbe(t *testing.T, which string, p *corev1.Probe, path string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s probe is not an HTTP GET: %+v", which, p)
		return
	}
	if p.HTTPGet.Path != path || p.HTTPGet.Port.IntValue() != 8081 {
		t.Errorf("%s probe GETs %s on port %s, want %s on 8081", which, p.HTTPGet.Path, p.HTTPGet.Port.String(), path)
	}
}

// checkMetricsService finds the metrics Service and checks it serves the pod's metrics port.
func checkMetricsService(t *testing.T, objs []*unstructured.Unstructured, dep *appsv1.Deployment) *corev1.Service {
	t.Helper()
	svcs := ofKind(objs, "Service")
	if len(svcs) != 1 {
		t.Fatalf("%d Services rendered, want 1 (metrics)", len(svcs))
	}
	svc := typed[corev1.Service](t, svcs[0])
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("Service %s ports %v, want one port named metrics, 8080 -> metrics", svc.Name, svc.Spec.Ports)
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("Service selector %v does not select the manager pods (labels %v)", svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	return svc
}

// checkRBAC checks the ClusterRole carries exactly the generated rules, that it and the
// leader-election Role are bound to the manager's ServiceAccount, and that the Role grants the
// Lease verbs leader election uses.
func checkRBAC(t *testing.T, objs []*unstructured.Unstructured, clusterRole, serviceAccount string) {
	t.Helper()
	cr := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", clusterRole))
	if want := generatedRules(t); !equality.Semantic.DeepEqual(cr.Rules, want) {
		t.Errorf("ClusterRole %s rules differ from config/rbac/role.yaml (run `make chart-sync`):\ngot:\n%s\nwant:\n%s", clusterRole, toYAML(t, cr.Rules), toYAML(t, want))
	}
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: serviceAccount, Namespace: namespace}
	crbs := ofKind(objs, "ClusterRoleBinding")
	if len(crbs) != 1 {
		t.Fatalf("%d ClusterRoleBindings, want 1", len(crbs))
	}
	crb := typed[rbacv1.ClusterRoleBinding](t, crbs[0])
	if crb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole}) || !slices.Equal(crb.Subjects, []rbacv1.Subject{subject}) {
		t.Errorf("ClusterRoleBinding %s binds %v to %v, want ClusterRole %s to %v", crb.Name, crb.RoleRef, crb.Subjects, clusterRole, subject)
	}
	roles := ofKind(objs, "Role")
	if len(roles) != 1 {
		t.Fatalf("%d Roles, want 1 (leader election)", len(roles))
	}
	role := typed[rbacv1.Role](t, roles[0])
	wantRules := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}}
	if role.Namespace != namespace || !equality.Semantic.DeepEqual(role.Rules, wantRules) {
		t.Errorf("Role %s/%s rules %v, want %v in %s", role.Namespace, role.Name, role.Rules, wantRules, namespace)
	}
	rbs := ofKind(objs, "RoleBinding")
	if len(rbs) != 1 {
		t.Fatalf("%d RoleBindings, want 1", len(rbs))
	}
	rb := typed[rbacv1.RoleBinding](t, rbs[0])
	if rb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name}) || !slices.Equal(rb.Subjects, []rbacv1.Subject{subject}) {
		t.Errorf("RoleBinding %s binds %v to %v, want Role %s to %v", rb.Name, rb.RoleRef, rb.Subjects, role.Name, subject)
	}
	// The manager pod runs as that ServiceAccount.
	if dep := ofKind(objs, "Deployment"); len(dep) == 1 {
		if sa := typed[appsv1.Deployment](t, dep[0]).Spec.Template.Spec.ServiceAccountName; sa != serviceAccount {
			t.Errorf("manager runs as ServiceAccount %q, RBAC is bound to %q", sa, serviceAccount)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// The API server

// apiServer starts envtest once (no CRDs: the manifests under test bring their own).
func apiServer(t *testing.T) client.Client {
	t.Helper()
	envOnce.Do(func() {
		e, err := apiservertest.Environment(false)
		if err != nil {
			envErr = err
			return
		}
		cfg, err := e.Start()
		if err != nil {
			envErr = fmt.Errorf("starting envtest: %w", err)
			return
		}
		env = e
		dir, err := os.MkdirTemp("", "install-test-")
		if err != nil {
			envErr = err
			return
		}
		envKubeconfig = filepath.Join(dir, "kubeconfig")
		if envErr = os.WriteFile(envKubeconfig, e.KubeConfig, 0o600); envErr != nil {
			return
		}
		cfg.WarningHandlerWithContext = warnings
		envClient, envErr = client.New(cfg, client.Options{})
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return envClient
}

// dryRunAll applies Namespaces and CRDs for real (the API server must know them for the rest to
// be judged), then every other object with a server-side dry run, and requires neither an error
// nor a warning (PodSecurity admission warns about a Deployment whose pods the namespace's
// enforced level would reject) and that nothing was persisted.
func dryRunAll(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := testContext(t)
	var rest []*unstructured.Unstructured
	var crds []string
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			applyForReal(t, c, o)
		case "CustomResourceDefinition":
			applyForReal(t, c, o)
			crds = append(crds, o.GetName())
		default:
			rest = append(rest, o)
		}
	}
	for _, name := range crds {
		waitEstablished(t, c, name)
	}
	if len(rest) == 0 {
		t.Fatalf("nothing to dry-run")
	}
	for _, o := range rest {
		warnings.reset()
		if err := dryRun(ctx, c, o.DeepCopy()); err != nil {
			t.Fatalf("server-side dry-run apply of %s %s/%s: %v\n%s", o.GetKind(), o.GetNamespace(), o.GetName(), err, toYAML(t, o.Object))
		}
		if w := warnings.reset(); len(w) > 0 {
			t.Errorf("server-side dry-run apply of %s %s/%s warned: %q", o.GetKind(), o.GetNamespace(), o.GetName(), w)
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s/%s exists after a dry run (get: %v)", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

func dryRun(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	// client.Apply (the SSA patch type) on unstructured objects: deprecated in favour of
	// client.Client.Apply with apply configurations, which unstructured manifests are not.
	return c.Patch(ctx, o, client.Apply, client.DryRunAll, client.FieldOwner("test"), client.ForceOwnership) //nolint:staticcheck
}

func applyForReal(t *testing.T, c client.Client, o *unstructured.Unstructured) {
	t.Helper()
	if err := c.Patch(testContext(t), o.DeepCopy(), client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil { //nolint:staticcheck
		t.Fatalf("server-side apply of %s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

func waitEstablished(t *testing.T, c client.Client, name string) {
	t.Helper()
	ctx := testContext(t)
	for {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		err := c.Get(ctx, client.ObjectKey{Name: name}, crd)
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, cond := range conds {
				if m, _ := cond.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD %s not Established: %v (last get error: %v)", name, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// warningCollector records the API server's warnings (the Warning response header).
type warningCollector struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningCollector) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// reset returns the warnings seen since the last reset.
func (w *warningCollector) reset() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.seen
	w.seen = nil
	return seen
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ---------------------------------------------------------------------------------------------
// Tools and rendering

// helm runs bin/helm in the repository root, installing it first if it is missing.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(root, "bin", "helm")
	helmOnce.Do(func() {
		version, _ := os.ReadFile(bin + ".version")
		if info, err := os.Stat(bin); err == nil && info.Mode()&0o111 != 0 && strings.TrimSpace(string(version)) == helmPackage+"@"+helmVersion {
			return
		}
		fmt.Fprintf(os.Stderr, "install_test: bin/helm %s is missing; building it with hack/install-tool.sh (about 2 minutes, once)\n", helmVersion)
		cmd := exec.Command(filepath.Join(root, "hack", "install-tool.sh"), bin, helmPackage, helmVersion)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			helmErr = fmt.Errorf("hack/install-tool.sh bin/helm %s %s: %v\n%s", helmPackage, helmVersion, err, out)
		}
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	// Keep helm's cache, config and data out of $HOME.
	scratch := filepath.Join(os.TempDir(), "install-test-helm-home")
	for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, filepath.Join(scratch, strings.ToLower(strings.TrimPrefix(v, "HELM_"))))
	}
	return run(t, root, bin, args...)
}

// helmTemplate renders the chart as release gate-operator in gate-system.
func helmTemplate(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	args = append([]string{"template", release, "charts/gate-operator", "--namespace", namespace}, args...)
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm %s failed: %v\n%s", strings.Join(args, " "), err, out)
	}
	return parseManifests(t, "helm template", []byte(out))
}

func kustomize(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	out, err := run(t, root, "kubectl", "kustomize", "config/default")
	if err != nil {
		t.Fatalf("kubectl kustomize config/default failed: %v\n%s", err, out)
	}
	return parseManifests(t, "kubectl kustomize config/default", []byte(out))
}

func run(t *testing.T, dir, name string, args ...string) (string, error) {
	t.Helper()
	inputsOnce.Do(func() { inputsErr = readInputs() })
	if inputsErr != nil {
		t.Fatalf("reading the install inputs: %v", inputsErr)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// parseManifests splits a YAML stream into objects, strictly: a duplicate key (such as a label
// given twice by two template helpers) is an error, not a silent override.
func parseManifests(t *testing.T, source string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	docs, err := splitYAML(data)
	if err != nil {
		t.Fatalf("%s: %v", source, err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range docs {
		var m map[string]any
		if err := yaml.UnmarshalStrict(doc, &m); err != nil {
			t.Fatalf("%s: %v in\n%s", source, err, doc)
		}
		o := &unstructured.Unstructured{Object: m}
		if o.GetAPIVersion() == "" || o.GetKind() == "" || o.GetName() == "" {
			t.Fatalf("%s: a document without apiVersion, kind or name:\n%s", source, doc)
		}
		objs = append(objs, o)
	}
	return objs
}

func splitYAML(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		blank := true
		for _, line := range strings.Split(string(doc), "\n") {
			if line = strings.TrimSpace(line); line != "" && line != "---" && !strings.HasPrefix(line, "#") {
				blank = false
				break
			}
		}
		if !blank {
			docs = append(docs, doc)
		}
	}
}

// generatedCRDs reads config/crd/bases, by CRD name.
func generatedCRDs(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs in config/crd/bases (%v)", err)
	}
	crds := map[string]*unstructured.Unstructured{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range parseManifests(t, path, data) {
			crds[o.GetName()] = o
		}
	}
	return crds
}

// generatedRules reads the rules of the ClusterRole in config/rbac/role.yaml.
func generatedRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	path := filepath.Join(root, "config", "rbac", "role.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range parseManifests(t, path, data) {
		if o.GetKind() == "ClusterRole" && o.GetName() == "gate-operator-manager" {
			return typed[rbacv1.ClusterRole](t, o).Rules
		}
	}
	t.Fatalf("%s has no ClusterRole gate-operator-manager", path)
	return nil
}

// generatedFiles reads the files hack/sync-chart owns in a chart directory.
func generatedFiles(t *testing.T, chart string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(chart, "templates", "crds", "*"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append(paths, filepath.Join(chart, "templates", "clusterrole.yaml"))
	files := map[string][]byte{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("reading generated chart file: %v", err)
		}
		rel, _ := filepath.Rel(chart, path)
		files[filepath.ToSlash(rel)] = data
	}
	return files
}

// typed converts an unstructured object, rejecting unknown fields.
func typed[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return out
}

func deployment(t *testing.T, objs []*unstructured.Unstructured, name string) *appsv1.Deployment {
	t.Helper()
	return typed[appsv1.Deployment](t, find(t, objs, "Deployment", name))
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	var have []string
	for _, o := range objs {
		have = append(have, o.GetKind()+"/"+o.GetName())
	}
	t.Fatalf("no %s %s among %v", kind, name, have)
	return nil
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind())
	}
	sort.Strings(out)
	return out
}

var clusterScoped = []string{"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}

func isNamespaced(o *unstructured.Unstructured) bool {
	return !slices.Contains(clusterScoped, o.GetKind())
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func writeValues(t *testing.T, values string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	writeFile(t, path, values)
	return path
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func toYAML(t *testing.T, v any) string {
	t.Helper()
	out, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(out)
}

func head(s string, lines int) string {
	parts := strings.SplitN(s, "\n", lines+1)
	if len(parts) > lines {
		parts = append(parts[:lines], "...")
	}
	return strings.Join(parts, "\n")
}

// firstDifference names the first line where committed and regenerated text differ.
func firstDifference(committed, regenerated []byte) string {
	a := strings.Split(string(committed), "\n")
	b := strings.Split(string(regenerated), "\n")
	for i := 0; i < len(a) || i < len(b); i++ {
		var la, lb string
		if i < len(a) {
			la = a[i]
		}
		if i < len(b) {
			lb = b[i]
		}
		if la != lb || (i >= len(a)) != (i >= len(b)) {
			return fmt.Sprintf("line %d:\n  committed:   %q\n  regenerated: %q", i+1, la, lb)
		}
	}
	return "(identical lines; the files differ in length)"
}
