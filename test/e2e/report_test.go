package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/controllers"
	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/testutil"
)

// testPostureReport: the namespace's posture Report (OpenReports, installed by the chart) passes
// the SessionConfirmer's agent, which the manager read from the fake API with the confirmer's
// key (it runs no tool under always_allow); it lists a pod the policy selects that was created
// with the webhooks off, and clears it once the pod is replaced by one created with them on,
// which the injection governs.
func testPostureReport(ctx context.Context, t *testing.T, env *localenv.Env) {
	c := env.Client
	pod := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "created-ungoverned", Labels: map[string]string{gatev1.LabelPolicy: "coding-agents"}},
			Spec: corev1.PodSpec{
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(1000))},
				Containers:      []corev1.Container{{Name: "agent", Image: localenv.TestbedImage, ImagePullPolicy: corev1.PullNever, Command: []string{"/testbed", "pause"}}},
			},
		}
	}
	finding := "fail pod-governed Pod/created-ungoverned"
	report := func() (*reportsv1alpha1.Report, []string, error) {
		r := &reportsv1alpha1.Report{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllers.ReportName}, r); err != nil {
			return nil, nil, err
		}
		var found []string
		for _, res := range r.Results {
			if res.Result != "pass" && len(res.Subjects) > 0 {
				found = append(found, fmt.Sprintf("%s %s %s/%s", res.Result, res.Rule, res.Subjects[0].Kind, res.Subjects[0].Name))
			}
		}
		return r, found, nil
	}
	testutil.Eventually(t, time.Minute, func() error {
		r, found, err := report()
		if err != nil {
			return err
		}
		if len(found) != 0 {
			return fmt.Errorf("findings before the test: %q", found)
		}
		if !slices.ContainsFunc(r.Results, func(res reportsv1alpha1.ReportResult) bool {
			return res.Rule == "agent-tools-confirmed" && res.Result == "pass" && len(res.Subjects) > 0 && res.Subjects[0].Name == "coding-agents"
		}) {
			return fmt.Errorf("no pass of the SessionConfirmer's agents in %+v", r.Results)
		}
		return nil
	})

	restore, err := env.WebhooksOff(ctx)
	must(t, err)
	created := pod()
	createErr := c.Create(ctx, created)
	must(t, restore())
	must(t, createErr)
	if _, injected := created.Annotations[gatev1.AnnotationInjection]; injected {
		t.Fatal("the pod was injected with the webhooks off")
	}
	testutil.Eventually(t, time.Minute, func() error {
		r, found, err := report()
		if err != nil {
			return err
		}
		if strings.Join(found, "; ") != finding || r.Summary.Fail != 1 {
			return fmt.Errorf("findings %q, summary %+v; want %q", found, r.Summary, finding)
		}
		return nil
	})
	r, _, _ := report()
	t.Logf("the Report lists the pod: %s", r.Results[0].Description)

	// Replaced by the same pod created with the webhooks on, governed: the finding clears.
	must(t, c.Delete(ctx, created, &client.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}))
	testutil.Eventually(t, time.Minute, func() error {
		if err := c.Create(ctx, pod()); err != nil {
			return err
		}
		return nil
	})
	testutil.Eventually(t, time.Minute, func() error {
		_, found, err := report()
		if err != nil {
			return err
		}
		if len(found) != 0 {
			return fmt.Errorf("findings %q after the pod was replaced governed", found)
		}
		return nil
	})
	governed := &corev1.Pod{}
	must(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "created-ungoverned"}, governed))
	if governed.Annotations[gatev1.AnnotationInjection] == "" {
		t.Fatal("the replacement carries no render digest")
	}
	must(t, c.Delete(ctx, governed, &client.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}))
}
