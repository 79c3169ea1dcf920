// Package authtest checks the gate API's authentication against a real kube-apiserver
// (envtest): ServiceAccount tokens issued by TokenRequest are reviewed with TokenReview.
package authtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/intutic/gate-operator/internal/apiservertest"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateapi"
	"github.com/intutic/gate-operator/internal/testutil"
)

func TestTokenReviewAuthentication(t *testing.T) {
	cfg := apiservertest.Start(t, false)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := testutil.Context(t, time.Minute)

	const audience = "gate.intutic.io/confirmer/agents/coding-agents"
	// token is a token of ns/name for audiences; none is the API server's own audience, as a
	// pod's default token has.
	token := func(ns, name string, audiences ...string) string {
		t.Helper()
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	allowed, other := token("agents", "orchestrator", audience), token("agents", "intruder", audience)
	apiServerToken := token("agents", "orchestrator")
	otherAudience := token("agents", "orchestrator", "gate.intutic.io/confirmer/agents/other")

	s, _ := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/p"}, nil)
	data, _ := s.Encode()
	g := gate.New("")
	if err := g.Load(data); err != nil {
		t.Fatal(err)
	}
	api := &gateapi.API{Gate: g, Log: logr.Discard(), Auth: &gateapi.Authenticator{
		Reviewer: cs.AuthenticationV1().TokenReviews(),
		Allowed:  []string{"agents/orchestrator"},
		Audience: audience,
	}}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()

	for name, tc := range map[string]struct {
		token  string
		status int
	}{
		"allowed ServiceAccount":    {allowed, 200},
		"other ServiceAccount":      {other, 403},
		"forged token":              {allowed[:len(allowed)-4] + "AAAA", 401},
		"no token":                  {"", 401},
		"the API server's audience": {apiServerToken, 401},
		"another audience":          {otherAudience, 401},
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/v1/guard", strings.NewReader(`{"tool":"read","input":{"file_path":"x"}}`))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.status)
			}
			if strings.Contains(string(body), tc.token) && tc.token != "" {
				t.Fatal("the response echoes the token")
			}
		})
	}
}

// TestPodBoundTokenNamesItsPod: a token bound to a pod (as kubelet projects one) is reviewed
// with the pod's name and UID, which the hook's human lane binds an approval to; an unbound
// token of the same ServiceAccount names no pod.
func TestPodBoundTokenNamesItsPod(t *testing.T) {
	cfg := apiservertest.Start(t, false)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := testutil.Context(t, time.Minute)
	const ns, sa, audience = "agents", "coding-agent", "gate.intutic.io/confirmer/agents/coding-agents"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "coding-agent-0"},
		Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "agent", Image: "agent"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := func(bound *authenticationv1.BoundObjectReference) string {
		t.Helper()
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600), BoundObjectRef: bound}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	auth := &gateapi.Authenticator{Reviewer: cs.AuthenticationV1().TokenReviews(), Allowed: []string{ns + "/" + sa}, Audience: audience}
	for name, tc := range map[string]struct {
		token string
		want  gateapi.Caller
	}{
		"bound to the pod": {token(&authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}),
			gateapi.Caller{ServiceAccount: ns + "/" + sa, PodName: pod.Name, PodUID: string(pod.UID)}},
		"bound to nothing": {token(nil), gateapi.Caller{ServiceAccount: ns + "/" + sa}},
	} {
		req, _ := http.NewRequest("POST", "http://confirmer/v1/hook/approvals", nil)
		req.Header.Set("Authorization", "Bearer "+tc.token)
		got, err := auth.AuthenticateCaller(req)
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", name, got, err, tc.want)
		}
	}
}
