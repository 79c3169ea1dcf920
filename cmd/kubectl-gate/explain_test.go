package main

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	gatelib "github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestExplain: explain names the layers that decide a pod's calls from the bundle its hook
// reads, in the order they are combined, and the layers that do not select it; with --tool,
// each layer's verdict and the result, as the gate decides them.
func TestExplain(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	ns := testutil.CreateNamespace(ctx, t, admin, "explain-")
	p := &gatev1.HarnessAgentPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agents", Generation: 1},
		Spec: gatev1.HarnessAgentPolicySpec{Rules: []gatev1.Rule{
			{Name: "no-force-push", Tools: []string{"bash"}, When: `input.command.contains("--force")`, Action: gatev1.ActionBlock, Reason: "no force pushes"},
		}},
	}
	layer := func(name string, priority int32, sel map[string]string, rules ...gatev1.Rule) bootstrap.ClusterLayer {
		t.Helper()
		c := &gatev1.ClusterHarnessAgentPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
			Spec: gatev1.ClusterHarnessAgentPolicySpec{Priority: priority, PodSelector: metav1.LabelSelector{MatchLabels: sel}, Rules: rules}}
		l, errs, err := bootstrap.ClusterLayerOf(c, "")
		if err != nil || len(errs) > 0 {
			t.Fatal(err, errs)
		}
		return l
	}
	baseline := layer("baseline", 10, nil, gatev1.Rule{Name: "no-rm", Tools: []string{"bash"}, When: `input.command.startsWith("rm")`, Action: gatev1.ActionBlock, Reason: "the platform forbids rm"})
	baseline.Exceptions = []gatelib.Exception{{Name: "incident-7", Rules: []string{"no-rm"}, Tools: []string{"Write"}, ExpiresAt: time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)}}
	res, err := bootstrap.BuildLayered(p, bootstrap.Layers{Cluster: []bootstrap.ClusterLayer{
		baseline,
		layer("untrusted", 20, map[string]string{"tier": "untrusted"}, gatev1.Rule{Name: "curl-asks", Tools: []string{"bash"}, Action: gatev1.ActionAsk, Reason: "x"}),
	}}, bootstrap.Published{}, bootstrap.Options{})
	if err != nil || res.HeldBack() {
		t.Fatal(err, res.CompileErrs, res.RenderErr)
	}
	must(t, admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agents-bootstrap", Labels: map[string]string{gatev1.LabelPolicy: "agents"}}, Data: res.Bundle.Data}))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-0", Labels: map[string]string{"tier": "trusted"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1"}},
			Volumes: []corev1.Volume{{Name: "gate-hooks", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "agents-bootstrap"}}},
			}}}}},
		},
	}
	must(t, admin.Create(ctx, pod))
	cfg := kubeconfig(t, ns, "admin")

	code, out, errOut := gate(ctx, "explain", "agent-0", "--kubeconfig", cfg)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"ClusterHarnessAgentPolicy/baseline", "HarnessAgentPolicy/" + ns + "/agents", "Not selecting this pod: ClusterHarnessAgentPolicy/untrusted (podSelector tier in (untrusted))",
		"Exception: incident-7 lifts no-rm of ClusterHarnessAgentPolicy/baseline for Write until", "m left)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain does not say %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "1   ClusterHarnessAgentPolicy/baseline") || strings.Index(out, "ClusterHarnessAgentPolicy/baseline") > strings.Index(out, "HarnessAgentPolicy/"+ns) {
		t.Errorf("the layers are not in the order they are combined:\n%s", out)
	}

	code, out, errOut = gate(ctx, "explain", "agent-0", "--kubeconfig", cfg, "--tool", "Bash", "--input", `{"command":"rm -rf /tmp/x"}`)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Logf("kubectl gate explain agent-0 --tool Bash --input ...:\n%s", out)
	if !strings.Contains(out, "Result:    Block by ClusterHarnessAgentPolicy/baseline, rule no-rm: the platform forbids rm") {
		t.Errorf("the result of a call the baseline blocks:\n%s", out)
	}
	if code, _, errOut = gate(ctx, "explain", "agent-0", "--kubeconfig", cfg, "--tool", "Bash", "--input", `{"command":`); code != exitFailed || !strings.Contains(errOut, "--input is not JSON") {
		t.Errorf("bad --input: exit %d, %s", code, errOut)
	}

	// A pod only cluster policies govern mounts its namespace's baseline bundle, which has no
	// namespace layer: explain names the cluster layers alone, as its hook decides with them.
	baselineBundle, err := bootstrap.RenderBaseline(bootstrap.Layers{Cluster: []bootstrap.ClusterLayer{baseline}}, ns, nil, bootstrap.Options{})
	must(t, err)
	must(t, admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bootstrap.BaselineConfigMap}, Data: baselineBundle.Data}))
	baselinePod := pod.DeepCopy()
	baselinePod.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "baseline-0", Labels: map[string]string{gatev1.LabelBaseline: "true"}}
	baselinePod.Spec.Volumes[0].Projected.Sources[0].ConfigMap.Name = bootstrap.BaselineConfigMap
	must(t, admin.Create(ctx, baselinePod))
	code, out, errOut = gate(ctx, "explain", "baseline-0", "--kubeconfig", cfg, "--tool", "Bash", "--input", `{"command":"rm -rf /tmp/x"}`)
	if code != exitOK {
		t.Fatalf("a baseline pod: exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "HarnessAgentPolicy/"+ns) || !strings.Contains(out, "Result:    Block by ClusterHarnessAgentPolicy/baseline, rule no-rm") {
		t.Errorf("a baseline pod is decided by the cluster layer alone:\n%s", out)
	}

	plain := pod.DeepCopy()
	plain.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "not-governed"}
	plain.Spec.Volumes = nil
	must(t, admin.Create(ctx, plain))
	if code, _, errOut = gate(ctx, "explain", "not-governed", "--kubeconfig", cfg); code != exitFailed || !strings.Contains(errOut, "mounts no gate-operator bundle") {
		t.Errorf("a pod with no bundle: exit %d, %s", code, errOut)
	}
}
