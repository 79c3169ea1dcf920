package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/webhook"
)

// testGovernedPods: on the node, with the chart's webhooks and admission policies, a labelled
// pod is refused when its final spec differs from what the injection renders, or when it would
// reach the gate's processes; the running labelled pod cannot be relabelled or take an
// ephemeral container (kubectl debug); and a labelled pod the injection never saw (here: one
// created while the pod webhook does not serve its namespace) is refused by the validating
// check. pod is the running labelled pod of testAdmission.
func testGovernedPods(ctx context.Context, t *testing.T, env *localenv.Env, pod string) {
	b, err := os.ReadFile(filepath.Join(env.Root, "docs", "examples", "sandbox-pod-labelled.yaml"))
	must(t, err)
	labelled := func(edit func(p *corev1.Pod)) string {
		p := &corev1.Pod{}
		must(t, yaml.UnmarshalStrict(b, p))
		p.Name, p.Namespace = "refused", ns
		p.Spec.Containers[0].Image = localenv.TestbedImage
		edit(p)
		out, err := yaml.Marshal(p)
		must(t, err)
		return string(out)
	}
	for _, tc := range []struct {
		name, want string
		edit       func(p *corev1.Pod)
	}{
		{"shareProcessNamespace", "may not set spec.shareProcessNamespace", func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(true) }},
		{"hostPID", "may not set spec.hostPID", func(p *corev1.Pod) { p.Spec.HostPID = true }},
		{"SYS_PTRACE", "may not add the capability", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_PTRACE"}
		}},
		{"gate-bin mounted writable", "mounts volume gate-bin writable", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: webhook.VolumeBin, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: webhook.VolumeBin, MountPath: "/opt/intutic/bin"}}
		}},
		{"the bundle's items remapped", "volume gate-hooks must be exactly what the injection renders", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: webhook.VolumeHooks, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "coding-agents-bootstrap"},
				Items:                []corev1.KeyToPath{{Key: "settings.json", Path: "gate-hook.sh"}}}}}}
		}},
		{"a Secret item projected over the wrapper", "volume gate-hooks must be exactly what the injection renders", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: webhook.VolumeHooks, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "coding-agents-bootstrap"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "mine"}, Items: []corev1.KeyToPath{{Key: "hook", Path: "gate-hook.sh"}}}},
			}}}}}
		}},
		{"the bundle unreadable (defaultMode 0)", "volume gate-hooks must be exactly what the injection renders", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: webhook.VolumeHooks, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0), Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "coding-agents-bootstrap"}}},
			}}}}}
		}},
		{"the managed settings unreadable", "volume claude-managed-settings must be exactly what the injection renders", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: webhook.VolumeManagedSettings, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "coding-agents-bootstrap"}, DefaultMode: ptr.To[int32](0)}}}}
		}},
	} {
		_, err := env.Kubectl(ctx, labelled(tc.edit), "create", "--dry-run=server", "-f", "-")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("a labelled pod with %s: %v, want a refusal saying %q", tc.name, err, tc.want)
		} else {
			t.Logf("a labelled pod with %s is refused: %s", tc.name, lastLine(err))
		}
	}

	// What the injection renders over: the pod's own install-gate-hook (writing exit 0 as the
	// hook) and wait-for-egress-policy (true) are replaced, first; a native sidecar gets the
	// gate's mounts and starts after the egress wait. The dry run answers the pod as stored.
	out, err := env.Kubectl(ctx, labelled(func(p *corev1.Pod) {
		always := corev1.ContainerRestartPolicyAlways
		p.Spec.InitContainers = []corev1.Container{
			{Name: "sidecar", Image: localenv.TestbedImage, RestartPolicy: &always},
			{Name: webhook.EgressWaitContainerName, Image: localenv.TestbedImage, Command: []string{"/bin/true"}},
			{Name: webhook.InstallContainerName, Image: localenv.TestbedImage, Command: []string{"/bin/sh", "-c", "echo 'exit 0' > /opt/intutic/bin/gate-hook"}},
		}
	}), "create", "--dry-run=server", "-o", "yaml", "-f", "-")
	must(t, err)
	stored := &corev1.Pod{}
	must(t, yaml.Unmarshal([]byte(out), stored))
	var order []string
	for _, c := range stored.Spec.InitContainers {
		order = append(order, c.Name)
	}
	install, wait, sidecar := stored.Spec.InitContainers[0], stored.Spec.InitContainers[1], stored.Spec.InitContainers[len(stored.Spec.InitContainers)-1]
	if strings.Join(order, ",") != webhook.InstallContainerName+","+webhook.EgressWaitContainerName+","+webhook.GateAgentContainerName+",sidecar" ||
		install.Command[0] != "/gate-hook" || wait.Command[0] != "/egress-wait" || len(sidecar.VolumeMounts) != 7 {
		t.Errorf("the pod as stored: init containers %v, install %q, wait %q, sidecar mounts %v", order, install.Command, wait.Command, sidecar.VolumeMounts)
	} else {
		t.Logf("the pod's own install-gate-hook and wait-for-egress-policy are replaced by the rendered ones (%q, %q), first, then gate-agent; the pod's native sidecar has the gate's mounts and starts after them", install.Command, wait.Command)
	}

	// The running pod: no relabelling, no ephemeral container.
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"removing its policy label", []string{"label", "pod", pod, gatev1.LabelPolicy + "-"}, "cannot change after it is created"},
		{"adding the skip annotation", []string{"annotate", "pod", pod, webhook.AnnotationSkipContainers + "=agent"}, "cannot change after it is created"},
		{"kubectl debug", []string{"debug", pod, "--image=" + localenv.TestbedImage, "-c", "debugger", "--attach=false"}, "takes no ephemeral containers"},
	} {
		_, err := env.Kubectl(ctx, "", append([]string{"-n", ns}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s of the running governed pod: %v, want a refusal saying %q", tc.name, err, tc.want)
		} else {
			t.Logf("%s of the running governed pod is refused: %s", tc.name, lastLine(err))
		}
	}

	// A labelled pod the injection never saw. The pod webhook stops serving the namespace for
	// the moment (as an install scoped by watchNamespaces leaves it out); the validating check
	// serves it still, and refuses the pod.
	mwc := "gate-operator"
	exclude := fmt.Sprintf(`[{"op":"add","path":"/webhooks/0/namespaceSelector/matchExpressions/-","value":{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":[%q]}}]`, ns)
	_, err = env.Kubectl(ctx, "", "patch", "mutatingwebhookconfiguration", mwc, "--type=json", "-p", exclude)
	must(t, err)
	_, err = env.Kubectl(ctx, labelled(func(*corev1.Pod) {}), "create", "--dry-run=server", "-f", "-")
	restore := `[{"op":"remove","path":"/webhooks/0/namespaceSelector/matchExpressions/1"}]`
	if _, rerr := env.Kubectl(ctx, "", "patch", "mutatingwebhookconfiguration", mwc, "--type=json", "-p", restore); rerr != nil {
		t.Fatalf("restoring the pod webhook's namespaceSelector: %v", rerr)
	}
	if want := "is not governed as the injection renders it"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a labelled pod the injection did not see: %v, want a refusal saying %q", err, want)
	} else {
		t.Logf("a labelled pod the injection did not see is refused: %s", lastLine(err))
	}
}

func lastLine(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	return lines[len(lines)-1]
}
