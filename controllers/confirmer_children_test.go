package controllers

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/confirmerconfig"
	"github.com/intutic/gate-operator/internal/testutil"
)

// TestConfirmerResources: a SessionConfirmer without spec.resources still gets a container
// with requests (so it is scheduled with room) and a memory limit (so a flood of clients costs
// one pod a restart, not the node its memory); spec.resources, when given, is used as it is.
func TestConfirmerResources(t *testing.T) {
	r := &SessionConfirmerReconciler{ConfirmerImage: testConfirmerImage, MountDir: "/etc/gate/bootstrap"}
	p := &gatev1.HarnessAgentPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "coding-agents"}}
	rendered := func(sc *gatev1.SessionConfirmer) corev1.ResourceRequirements {
		t.Helper()
		d := r.desiredDeployment(sc, p)
		c := d.Spec.Template.Spec.Containers[0]
		var out corev1.ResourceRequirements
		if c.Resources != nil {
			if c.Resources.Requests != nil {
				out.Requests = *c.Resources.Requests
			}
			if c.Resources.Limits != nil {
				out.Limits = *c.Resources.Limits
			}
		}
		return out
	}

	sc := newConfirmerObj("agents")
	sc.Spec.Resources = corev1.ResourceRequirements{}
	got := rendered(sc)
	for name, want := range map[string]struct {
		q    *resource.Quantity
		want string
	}{
		"requests.cpu":    {got.Requests.Cpu(), "50m"},
		"requests.memory": {got.Requests.Memory(), "64Mi"},
		"limits.memory":   {got.Limits.Memory(), "256Mi"},
	} {
		if want.q.Cmp(resource.MustParse(want.want)) != 0 {
			t.Errorf("default %s %s, want %s", name, want.q, want.want)
		}
	}
	if _, ok := got.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("a default CPU limit throttles the gate's answers: %v", got.Limits)
	}

	given := newConfirmerObj("agents") // requests cpu 50m only
	if got := rendered(given); len(got.Limits) != 0 || len(got.Requests) != 1 || got.Requests.Cpu().String() != "50m" {
		t.Errorf("spec.resources must be used as given: %+v", got)
	}
}

// TestConfirmerArgsTurnOnApprovals: the confirmer is told which SessionConfirmer (name, UID,
// namespace) and policy its ToolApprovals belong to, and whether they may show the input; the
// arguments pass the confirmer's own validation.
func TestConfirmerArgsTurnOnApprovals(t *testing.T) {
	p := &gatev1.HarnessAgentPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "coding-agents"}}
	sc := newConfirmerObj("agents")
	sc.UID = "0b7e1c3a-9d7e-4c5b-8f3e-2a1b0c9d8e7f"
	for _, show := range []bool{false, true} {
		sc.Spec.HumanApproval.ShowInput = show
		args := confirmerArgs(sc, p, "/etc/gate/bootstrap", 2)
		fs := flag.NewFlagSet("confirmer", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c, err := confirmerconfig.Parse(fs, args)
		if err != nil {
			t.Fatalf("the confirmer refuses its arguments %q: %v", args, err)
		}
		if c.ConfirmerName != "agents" || c.ConfirmerUID != string(sc.UID) || c.Namespace != "agents" || c.Policy != "coding-agents" || c.HumanApprovalShowInput != show {
			t.Errorf("showInput %v: %+v", show, c)
		}
	}
}

// TestConfirmerMayAnswerApprovals: the confirmer's ServiceAccount may create, read and watch
// ToolApprovals, write their status and record Events, as the API server enforces it
// (impersonating the account); it may not rewrite or delete an approval.
func TestConfirmerMayAnswerApprovals(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	ns, cfg := asConfirmer(ctx, t)
	sa, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ta := &gatev1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mcp-deploy-run-0123456789", Labels: map[string]string{gatev1.LabelConfirmer: "agents"}},
		Spec: gatev1.ToolApprovalSpec{Surface: gatev1.SurfaceManagedAgents, Policy: "coding-agents", ToolUseID: "sevt_1", Tool: "mcp__deploy__run",
			Input: gatev1.ToolApprovalInput{SHA256: strings.Repeat("0", 64)}, ExpiresAt: metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))},
	}
	testutil.Eventually(t, 10*time.Second, func() error { return sa.Create(ctx, ta) }) // the Role may still be on its way
	var l gatev1.ToolApprovalList
	if err := sa.List(ctx, &l, client.InNamespace(ns)); err != nil || len(l.Items) != 1 {
		t.Fatalf("list: %d %v", len(l.Items), err)
	}
	w, err := sa.Watch(ctx, &gatev1.ToolApprovalList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	w.Stop()
	ta.Status.State = gatev1.ApprovalExpired
	meta.SetStatusCondition(&ta.Status.Conditions, metav1.Condition{Type: gatev1.ConditionExpired, Status: metav1.ConditionTrue, Reason: "NoAnswer"})
	if err := sa.Status().Update(ctx, ta); err != nil {
		t.Fatalf("status update: %v", err)
	}
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "approval-"}, EventTime: metav1.NowMicro(),
		ReportingController: "gate-confirmer", ReportingInstance: "gate-confirmer-x", Action: "Expired", Reason: "Expired", Type: corev1.EventTypeWarning,
		Regarding: corev1.ObjectReference{APIVersion: gatev1.GroupVersion.String(), Kind: "ToolApproval", Namespace: ns, Name: ta.Name}}
	if err := sa.Create(ctx, ev); err != nil {
		t.Fatalf("event: %v", err)
	}
	ta.Labels["x"] = "y"
	if err := sa.Update(ctx, ta); !apierrors.IsForbidden(err) {
		t.Fatalf("update of an approval: want Forbidden, got %v", err)
	}
	if err := sa.Delete(ctx, ta); !apierrors.IsForbidden(err) {
		t.Fatalf("delete of an approval: want Forbidden, got %v", err)
	}
}

// TestConfirmerTokensAndMetrics: each confirmer takes only tokens bound to its own audience,
// and serves /metrics on a port apart from the gate API's, which the pod declares; the probes
// stay on the API port.
func TestConfirmerTokensAndMetrics(t *testing.T) {
	p := &gatev1.HarnessAgentPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "coding-agents"}}
	sc := newConfirmerObj("agents")
	sc.UID = "0b7e1c3a-9d7e-4c5b-8f3e-2a1b0c9d8e7f"
	fs := flag.NewFlagSet("confirmer", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := confirmerconfig.Parse(fs, confirmerArgs(sc, p, "/etc/gate/bootstrap", 2))
	if err != nil {
		t.Fatal(err)
	}
	if want := confirmerconfig.TokenAudience(sc.Namespace, sc.Name); c.TokenAudience != want {
		t.Errorf("token audience %q, want %s", c.TokenAudience, want)
	}
	if c.MetricsListen != fmt.Sprintf(":%d", confirmerMetricsPort) || c.Listen != fmt.Sprintf(":%d", confirmerPort) {
		t.Errorf("listen %q, metrics %q", c.Listen, c.MetricsListen)
	}
	r := &SessionConfirmerReconciler{MountDir: "/etc/gate/bootstrap"}
	d := r.desiredDeployment(sc, p)
	ctr := d.Spec.Template.Spec.Containers[0]
	ports := map[string]int32{}
	for _, port := range ctr.Ports {
		ports[*port.Name] = *port.ContainerPort
	}
	if ports["http"] != confirmerPort || ports["metrics"] != confirmerMetricsPort {
		t.Errorf("container ports %v", ports)
	}
}
