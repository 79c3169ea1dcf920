package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/confirm/membership"
	"github.com/intutic/gate-operator/internal/testutil"
)

func newConfirmerObj(ns string) *gatev1.SessionConfirmer {
	return &gatev1.SessionConfirmer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agents"},
		Spec: gatev1.SessionConfirmerSpec{
			PolicyRef: gatev1.PolicyReference{Name: "coding-agents"},
			Anthropic: gatev1.AnthropicSpec{APIKeySecretRef: gatev1.SecretKeyReference{Name: "anthropic", Key: "api-key"}},
			Sessions:  gatev1.SessionsSpec{AgentIDs: []string{"agent_1", "agent_2"}},
			Webhook:   &gatev1.WebhookSpec{SigningKeySecretRef: gatev1.SecretKeyReference{Name: "anthropic-webhook", Key: "signing-key"}},
			GateAPI:   gatev1.GateAPISpec{AllowedServiceAccounts: []gatev1.ServiceAccountName{"agents/orchestrator"}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}},
		},
	}
}

func createSecret(t *testing.T, ns, name, key string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{key: []byte("sk-ant-not-logged")}}
	if err := k8sClient.Create(testutil.Context(t, 60*time.Second), s); err != nil {
		t.Fatal(err)
	}
}

func waitConfirmer(t *testing.T, sc *gatev1.SessionConfirmer, typ string, status metav1.ConditionStatus, reason string) *gatev1.SessionConfirmer {
	t.Helper()
	got := &gatev1.SessionConfirmer{}
	testutil.Eventually(t, 20*time.Second, func() error {
		if err := k8sClient.Get(testutil.Context(t, 60*time.Second), client.ObjectKeyFromObject(sc), got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, typ)
		switch {
		case got.Status.ObservedGeneration != got.Generation:
			return fmt.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
		case c == nil:
			return fmt.Errorf("no %s condition", typ)
		case c.Status != status || (reason != "" && c.Reason != reason):
			return fmt.Errorf("%s is %s/%s (%s)", typ, c.Status, c.Reason, c.Message)
		case c.ObservedGeneration != got.Generation:
			return fmt.Errorf("%s observedGeneration %d", typ, c.ObservedGeneration)
		}
		return nil
	})
	return got
}

func TestConfirmerWaitsForPolicyAndSecrets(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "policy-")
	sc := newConfirmerObj(ns)
	if err := k8sClient.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	got := waitConfirmer(t, sc, gatev1.ConditionPolicyResolved, metav1.ConditionFalse, gatev1.ReasonPolicyNotFound)
	if c := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Ready %+v", c)
	}

	p := newPolicy(ns, "coding-agents")
	if err := k8sClient.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got = waitConfirmer(t, sc, gatev1.ConditionAvailable, metav1.ConditionFalse, gatev1.ReasonSecretMissing)
	c := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionAvailable)
	if !strings.Contains(c.Message, "anthropic/api-key") || !strings.Contains(c.Message, "anthropic-webhook/signing-key") {
		t.Fatalf("the condition does not name the missing keys: %q", c.Message)
	}
	if strings.Contains(c.Message, "sk-ant") {
		t.Fatal("a secret value leaked into status")
	}
	// No pod that would crash-loop on a missing Secret.
	if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "agents-confirmer"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Deployment exists before its Secrets: %v", err)
	}
	waitConfirmer(t, sc, gatev1.ConditionPolicyResolved, metav1.ConditionTrue, gatev1.ReasonPolicyResolved)
}

// confirmerNamespace is a new namespace with what a SessionConfirmer needs: the policy
// coding-agents and the API key and webhook key Secrets.
func confirmerNamespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	ns := testutil.CreateNamespace(ctx, t, k8sClient, "policy-")
	if err := k8sClient.Create(ctx, newPolicy(ns, "coding-agents")); err != nil {
		t.Fatal(err)
	}
	createSecret(t, ns, "anthropic", "api-key")
	createSecret(t, ns, "anthropic-webhook", "signing-key")
	return ns
}

func TestConfirmerChildren(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	ns := confirmerNamespace(ctx, t)
	sc := newConfirmerObj(ns)
	if err := k8sClient.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	got := waitConfirmer(t, sc, gatev1.ConditionAvailable, metav1.ConditionFalse, gatev1.ReasonUnavailable)
	key := types.NamespacedName{Namespace: ns, Name: "agents-confirmer"}
	d := &appsv1.Deployment{}
	if err := k8sClient.Get(ctx, key, d); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{d, &corev1.Service{}, &corev1.ServiceAccount{}, &policyv1.PodDisruptionBudget{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		if err := k8sClient.Get(ctx, key, obj); err != nil {
			t.Fatalf("%T: %v", obj, err)
		}
		ref := metav1.GetControllerOf(obj)
		if ref == nil || ref.UID != got.UID || ref.Kind != "SessionConfirmer" {
			t.Fatalf("%T has no owner reference to the SessionConfirmer", obj)
		}
		if obj.GetLabels()[gatev1.LabelManagedBy] != "gate-operator" || obj.GetLabels()[gatev1.LabelConfirmer] != "agents" {
			t.Fatalf("%T labels %v", obj, obj.GetLabels())
		}
	}

	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas %d", *d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	for _, v := range pod.Volumes {
		if v.Secret != nil && !podUserCanRead(&pod, v.Secret) {
			t.Errorf("the pod's user cannot read the files of Secret volume %s (mode %#o, pod security context %+v)", v.Name, ptr.Deref(v.Secret.DefaultMode, 0o644), pod.SecurityContext)
		}
	}
	c := pod.Containers[0]
	if c.Image != testConfirmerImage || pod.ServiceAccountName != "agents-confirmer" || !ptr.Deref(pod.AutomountServiceAccountToken, false) {
		t.Errorf("image %s, sa %s", c.Image, pod.ServiceAccountName)
	}
	psc, csc := pod.SecurityContext, c.SecurityContext
	if !ptr.Deref(psc.RunAsNonRoot, false) || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		!ptr.Deref(csc.ReadOnlyRootFilesystem, false) || ptr.Deref(csc.AllowPrivilegeEscalation, true) || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("not the restricted profile: pod %+v container %+v", psc, csc)
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes %+v %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	if c.Resources.Requests.Cpu().String() != "50m" {
		t.Errorf("resources %+v", c.Resources)
	}
	if len(c.Env) != 0 || len(c.EnvFrom) != 0 {
		t.Errorf("the confirmer must take no environment (Secrets are files): %+v %+v", c.Env, c.EnvFrom)
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{
		"--snapshot=/etc/gate/bootstrap/policy-snapshot.rules", "--workspace=ws_123", "--anthropic-base-url=https://api.anthropic.com",
		"--anthropic-api-key-file=/etc/gate/anthropic/api-key", "--agent-ids=agent_1,agent_2", "--poll-interval=10s",
		"--human-approval-deadline=15m0s", "--allowed-service-accounts=agents/orchestrator",
		"--webhook-signing-key-file=/etc/gate/webhook/signing-key", "--members-lease=agents-confirmer", "--leader-election-namespace=" + ns,
	} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %s: %s", want, args)
		}
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	if vols["bootstrap"].ConfigMap == nil || vols["bootstrap"].ConfigMap.Name != "coding-agents-bootstrap" ||
		vols["anthropic"].Secret == nil || vols["anthropic"].Secret.SecretName != "anthropic" || vols["webhook"].Secret == nil {
		t.Errorf("volumes %+v", pod.Volumes)
	}

	// The Deployment becomes available (as kube-controller-manager would report it).
	d.Status = appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, ObservedGeneration: d.Generation,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "ok", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
	if err := k8sClient.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	got = waitConfirmer(t, sc, gatev1.ConditionReady, metav1.ConditionTrue, gatev1.ReasonReady)
	pol := getPolicy(t, newPolicy(ns, "coding-agents"))
	if got.Status.ReadyReplicas != 2 || got.Status.ServiceURL != "http://agents-confirmer."+ns+".svc:8080" || got.Status.SnapshotDigest != pol.Status.SnapshotDigest || got.Status.SnapshotDigest == "" {
		t.Fatalf("status %+v", got.Status)
	}

	// One replica: no disruption budget, no members Lease.
	got.Spec.Replicas = ptr.To[int32](1)
	if err := k8sClient.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if err := k8sClient.Get(ctx, key, &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the PodDisruptionBudget is still there: %v", err)
		}
		d := &appsv1.Deployment{}
		if err := k8sClient.Get(ctx, key, d); err != nil {
			return err
		}
		if *d.Spec.Replicas != 1 || strings.Contains(strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "), "--members-lease") {
			return fmt.Errorf("replicas %d args %v", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Args)
		}
		return nil
	})

	// A Deployment edited by hand is restored.
	if err := k8sClient.Get(ctx, key, d); err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = "attacker/confirmer:latest"
	if err := k8sClient.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		d := &appsv1.Deployment{}
		if err := k8sClient.Get(ctx, key, d); err != nil {
			return err
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != testConfirmerImage {
			return fmt.Errorf("image %s", img)
		}
		return nil
	})
}

// podUserCanRead reports whether the pod's user can read the files of a Secret volume, as
// kubelet lays them out: owned by root, group root or, with fsGroup, group fsGroup, with the
// volume's mode (items carry no mode of their own here).
func podUserCanRead(pod *corev1.PodSpec, src *corev1.SecretVolumeSource) bool {
	mode := ptr.Deref(src.DefaultMode, corev1.SecretVolumeSourceDefaultMode)
	for _, it := range src.Items {
		if it.Mode != nil {
			mode &= *it.Mode
		}
	}
	sc := pod.SecurityContext
	uid := ptr.Deref(sc.RunAsUser, 0)
	if uid == 0 {
		return true
	}
	groups := []int64{ptr.Deref(sc.RunAsGroup, 0)}
	groups = append(groups, sc.SupplementalGroups...)
	fileGroup := int64(0)
	if sc.FSGroup != nil {
		fileGroup = *sc.FSGroup
		groups = append(groups, *sc.FSGroup) // kubelet adds fsGroup to the container's groups
	}
	return mode&0o004 != 0 || mode&0o040 != 0 && slices.Contains(groups, fileGroup)
}

// TestConfirmerLeaseIsItsOwn: the confirmer's ServiceAccount may create Leases and get or
// update its own, and no other (RBAC as the API server enforces it, impersonating the account).
func TestConfirmerLeaseIsItsOwn(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	ns, cfg := asConfirmer(ctx, t)
	sa, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	own := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agents-confirmer"}}
	testutil.Eventually(t, 10*time.Second, func() error { return sa.Create(ctx, own) }) // the Role may still be on its way
	if err := sa.Get(ctx, client.ObjectKeyFromObject(own), own); err != nil {
		t.Fatalf("get of its own Lease: %v", err)
	}
	if err := sa.Update(ctx, own); err != nil {
		t.Fatalf("update of its own Lease: %v", err)
	}
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gate-operator.gate.intutic.io"}}
	if err := k8sClient.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := sa.Get(ctx, client.ObjectKeyFromObject(other), &coordinationv1.Lease{}); !apierrors.IsForbidden(err) {
		t.Fatalf("get of another Lease: want Forbidden, got %v", err)
	}
	if err := sa.Update(ctx, other); !apierrors.IsForbidden(err) {
		t.Fatalf("update of another Lease: want Forbidden, got %v", err)
	}

	// Those rights are all a replica needs to share the sessions through the Lease.
	joined := make(chan struct{})
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- membership.Run(mctx, membership.Options{Leases: kubernetes.NewForConfigOrDie(cfg).CoordinationV1(), Namespace: ns, Name: "agents-confirmer",
			Identity: "agents-confirmer-7d9f-x2x4z", Renew: 100 * time.Millisecond, Log: logr.Discard(), OnChange: func(m []string) {
				if slices.Contains(m, "agents-confirmer-7d9f-x2x4z") {
					close(joined)
				}
			}})
	}()
	select {
	case <-joined:
	case err := <-done:
		t.Fatalf("membership ended before joining: %v", err)
	case <-ctx.Done():
		t.Fatal("the replica never joined under its Role")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestConfirmerRefusedApplyIsACondition: a child the API server refuses shows in Available and
// Ready, naming the child and quoting the API server.
func TestConfirmerRefusedApplyIsACondition(t *testing.T) {
	ctx := testutil.Context(t, 60*time.Second)
	ns := confirmerNamespace(ctx, t)
	const message = "no new Deployments in this namespace"
	refuseWrites(t, ns, "deployments", message)
	sc := newConfirmerObj(ns)
	if err := k8sClient.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	got := waitConfirmer(t, sc, gatev1.ConditionAvailable, metav1.ConditionFalse, gatev1.ReasonApplyFailed)
	c := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionAvailable)
	if !strings.Contains(c.Message, "Deployment agents-confirmer") || !strings.Contains(c.Message, message) {
		t.Fatalf("the condition does not name the child and the API server's words: %q", c.Message)
	}
	if r := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionReady); r.Status != metav1.ConditionFalse || r.Reason != gatev1.ReasonApplyFailed {
		t.Fatalf("Ready: %+v", r)
	}
}

// asConfirmer creates a SessionConfirmer in a fresh namespace, waits until the controller has
// applied its children (the ServiceAccount, Role and RoleBinding), and returns the namespace
// and a config that impersonates the confirmer's ServiceAccount.
func asConfirmer(ctx context.Context, t *testing.T) (string, *rest.Config) {
	t.Helper()
	ns := confirmerNamespace(ctx, t)
	sc := newConfirmerObj(ns)
	if err := k8sClient.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	waitConfirmer(t, sc, gatev1.ConditionAvailable, metav1.ConditionFalse, gatev1.ReasonUnavailable)
	cfg := rest.CopyConfig(testConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":agents-confirmer"}
	return ns, cfg
}
