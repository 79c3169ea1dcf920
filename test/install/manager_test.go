package install_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type managerWant struct {
	replicas        int32
	image           string
	pullPolicy      corev1.PullPolicy // empty: IfNotPresent
	confirmerImage  string
	metricsInsecure bool // --metrics-secure=false
	leaderElect     bool
	namespaces      string   // --namespaces, empty: not passed
	managerFlags    []string // the manager.* values, as flags
	// webhooks are the webhook flags; nil is the default install's (self-managed certificates),
	// unless noWebhooks (webhook.enabled false).
	webhooks   []string
	noWebhooks bool
	extraArgs  []string
	resources  corev1.ResourceRequirements
}

// selfManagedWebhookArgs are the webhook flags of an install named gate-operator in gate-system
// whose manager keeps its webhook certificate.
func selfManagedWebhookArgs(confirmerImage string) []string {
	return []string{
		"--webhook-port=9443", "--webhook-certs=self", "--webhook-namespace=" + namespace,
		"--webhook-service=gate-operator-webhook", "--webhook-secret=gate-operator-webhook-cert",
		"--webhook-configuration=gate-operator", "--gate-hook-image=" + confirmerImage,
	}
}

// defaultCanaryArgs are the egress canary flags of an install named gate-operator in
// gate-system: every egress NetworkPolicy allows 9444 on the pods with these labels there.
var defaultCanaryArgs = []string{
	"--egress-canary-port=9444", "--egress-canary-denied-port=9445", "--egress-canary-service=gate-operator-egress-canary",
	"--egress-canary-namespace=" + namespace,
	"--egress-canary-pod-labels=app.kubernetes.io/component=manager,app.kubernetes.io/instance=gate-operator,app.kubernetes.io/name=gate-operator",
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
	if sc := c.SecurityContext; sc == nil {
		t.Errorf("manager container has no securityContext")
	} else {
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
	if ports["metrics"] != 8443 || ports["health"] != 8081 || ports["canary-control"] != 9444 || ports["canary-denied"] != 9445 {
		t.Errorf("container ports %v, want metrics 8443, health 8081, canary-control 9444 and canary-denied 9445", ports)
	}
	checkWebhookMount(t, pod, !want.noWebhooks)

	wantArgs := []string{"--metrics-bind-address=:8443", "--health-probe-bind-address=:8081", "--confirmer-image=" + want.confirmerImage}
	if want.metricsInsecure {
		wantArgs = append(wantArgs, "--metrics-secure=false")
	}
	if want.leaderElect {
		wantArgs = append(wantArgs, "--leader-elect")
	}
	if want.namespaces != "" {
		wantArgs = append(wantArgs, "--namespaces="+want.namespaces)
	}
	wantArgs = append(wantArgs, want.managerFlags...)
	switch {
	case want.noWebhooks:
	case want.webhooks == nil:
		wantArgs = append(wantArgs, selfManagedWebhookArgs(want.confirmerImage)...)
	default:
		wantArgs = append(wantArgs, want.webhooks...)
	}
	wantArgs = append(wantArgs, defaultCanaryArgs...)
	wantArgs = append(wantArgs, want.extraArgs...)
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("manager args = %q, want %q", c.Args, wantArgs)
	}
	if !equality.Semantic.DeepEqual(c.Resources, want.resources) {
		t.Errorf("manager resources = %v, want %v", c.Resources, want.resources)
	}
}

// checkWebhookMount checks the webhook port and the certificate Secret's mount: read-only, 0440,
// and readable by the manager's group (fsGroup), which runs as non-root.
func checkWebhookMount(t *testing.T, pod corev1.PodSpec, webhooks bool) {
	t.Helper()
	c := pod.Containers[0]
	hasPort := slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook" && p.ContainerPort == 9443 })
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "webhook-certs" && m.MountPath == "/etc/gate-operator/webhook-certs" && m.ReadOnly
	})
	secret := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Name == "webhook-certs" && v.Secret != nil && v.Secret.SecretName == "gate-operator-webhook-cert" &&
			v.Secret.DefaultMode != nil && *v.Secret.DefaultMode == 0o440
	})
	if hasPort != webhooks || mounted != webhooks || secret != webhooks {
		t.Errorf("webhooks %v: port %v, certificate mount %v, Secret volume (0440) %v", webhooks, hasPort, mounted, secret)
	}
	if psc := pod.SecurityContext; psc == nil || psc.FSGroup == nil || *psc.FSGroup != 65532 {
		t.Errorf("pod fsGroup is not 65532 (the manager's group, which must read the certificate Secret): %+v", psc)
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
	var svcs []*unstructured.Unstructured
	for _, o := range ofKind(objs, "Service") {
		if o.GetLabels()["app.kubernetes.io/component"] == "metrics" {
			svcs = append(svcs, o)
		}
	}
	if len(svcs) != 1 {
		t.Fatalf("%d metrics Services rendered, want 1", len(svcs))
	}
	svc := typed[corev1.Service](t, svcs[0])
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("Service %s ports %v, want one port named metrics, 8443 -> metrics", svc.Name, svc.Spec.Ports)
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("Service selector %v does not select the manager pods (labels %v)", svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	return svc
}

// checkCanaryService finds the egress canary's Service and checks that it serves the pod's two
// canary ports, and that the pods the policies' canary rule selects (--egress-canary-pod-labels)
// are the manager's.
func checkCanaryService(t *testing.T, objs []*unstructured.Unstructured, dep *appsv1.Deployment) *corev1.Service {
	t.Helper()
	svc := typed[corev1.Service](t, find(t, objs, "Service", "gate-operator-egress-canary"))
	want := []corev1.ServicePort{
		{Name: "canary-control", Port: 9444, TargetPort: intstr.FromString("canary-control"), Protocol: corev1.ProtocolTCP},
		{Name: "canary-denied", Port: 9445, TargetPort: intstr.FromString("canary-denied"), Protocol: corev1.ProtocolTCP},
	}
	if !equality.Semantic.DeepEqual(svc.Spec.Ports, want) {
		t.Errorf("Service %s ports %v, want %v", svc.Name, svc.Spec.Ports, want)
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("Service selector %v does not select the manager pods (labels %v)", svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--egress-canary-pod-labels="); ok {
			sel, err := labels.ConvertSelectorToLabelsMap(v)
			if err != nil || !labels.SelectorFromSet(sel).Matches(labels.Set(dep.Spec.Template.Labels)) {
				t.Errorf("--egress-canary-pod-labels=%s does not select the manager pods (labels %v): egress policies would not allow the control port", v, dep.Spec.Template.Labels)
			}
		}
	}
	return svc
}
