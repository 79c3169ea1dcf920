package e2e

import (
	"context"
	"path/filepath"
	"testing"

	dto "github.com/prometheus/client_model/go"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/promquery"
	"github.com/intutic/gate-operator/internal/promquery/promquerytest"
	"github.com/intutic/gate-operator/internal/promscrape"
)

// testMonitoring scrapes what a Prometheus would on the node: every manager pod (over HTTPS,
// with the token of a ServiceAccount bound to the metrics-reader ClusterRole, as the chart's
// ServiceMonitor does), every confirmer pod's metrics port, and the gate-agent sidecar of the
// sandbox pod; every metric and label the chart's dashboard and alert rules read must be served
// by one of them. Run it after the flows that count (decisions, approvals, fallbacks), since a
// labelled metric has no series until something is counted.
func testMonitoring(ctx context.Context, t *testing.T, env *localenv.Env, sandboxNamespace, sandbox string) {
	c := env.Client
	chart, err := promquery.ChartQueries(filepath.Join(env.Root, "charts", "gate-operator"))
	must(t, err)
	queries := promquerytest.Parse(t, chart)

	// A scraper's ServiceAccount, bound to the chart's metrics-reader ClusterRole.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: localenv.OperatorNamespace, Name: "e2e-prometheus"}}
	must(t, client.IgnoreAlreadyExists(c.Create(ctx, sa)))
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-prometheus-gate-operator-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "gate-operator-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	must(t, client.IgnoreAlreadyExists(c.Create(ctx, binding)))
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), binding)
		_ = c.Delete(context.Background(), sa)
	})
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	must(t, c.SubResource("token").Create(ctx, sa, tr))

	var scrapes []map[string]*dto.MetricFamily
	scrape := func(what, url, token string) {
		t.Helper()
		// The binding is honoured within a moment; a refused scrape is retried.
		var families map[string]*dto.MetricFamily
		wait(t, what+" serves its metrics", func() bool {
			families, err = promscrape.Families(url, token)
			return err == nil
		})
		scrapes = append(scrapes, families)
	}
	pods := func(namespace string, labels client.MatchingLabels) []corev1.Pod {
		var l corev1.PodList
		must(t, c.List(ctx, &l, client.InNamespace(namespace), labels))
		var out []corev1.Pod
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
				out = append(out, p)
			}
		}
		return out
	}
	managers := pods(localenv.OperatorNamespace, client.MatchingLabels{"app.kubernetes.io/component": "manager"})
	confirmers := pods("", client.MatchingLabels{"app.kubernetes.io/name": "gate-confirmer"})
	if len(managers) == 0 || len(confirmers) == 0 {
		t.Fatalf("%d manager pods and %d confirmer pods running; want both", len(managers), len(confirmers))
	}
	for _, p := range managers { // only the leader serves the policies' readiness: scrape them all
		scrape("manager pod "+p.Name, "https://"+p.Status.PodIP+":8443/metrics", tr.Status.Token)
	}
	for _, p := range confirmers {
		scrape("confirmer pod "+p.Namespace+"/"+p.Name, "http://"+p.Status.PodIP+":8081/metrics", "")
	}
	sb := &corev1.Pod{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: sandboxNamespace, Name: sandbox}, sb))
	scrape("the gate-agent of "+sandbox, "http://"+sb.Status.PodIP+":18081/metrics", "")

	for _, p := range promquery.Check(promquery.ServedBy(scrapes...), queries) {
		t.Errorf("%s", p)
	}
}
