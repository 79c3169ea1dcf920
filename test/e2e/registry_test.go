package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/testutil"
)

// testRegistryInstall: the chart was installed from the local registry as an OCI artifact, and
// the node pulled every gate-operator image from it by the index digest the node's start pushed:
// the manager from the authenticated address with the chart's pull secret, the confirmer and the
// sandbox pod's injected containers from ghcr.io (the registry is that host's server). The
// authenticated address refuses a pod without the secret. Each pushed index carries a cosign
// signature and a signed SBOM attestation that cosign's library verifies with the key the
// node's start generated.
func testRegistryInstall(ctx context.Context, t *testing.T, env *localenv.Env) {
	c := env.Client
	if !strings.HasPrefix(env.Chart.Ref, "oci://"+env.Registry()+"/") || env.Chart.Version == "" || !strings.HasPrefix(env.Chart.Digest, "sha256:") {
		t.Errorf("the chart was not installed from the local registry: %+v", env.Chart)
	}
	manager, err := env.ImageDigest(localenv.ManagerRepository)
	must(t, err)
	confirmer, err := env.ImageDigest(localenv.ConfirmerRepository)
	must(t, err)

	// Every container of gate-operator's images runs the pushed index by digest.
	runs := func(namespace string, want map[string]string) {
		t.Helper()
		pods := &corev1.PodList{}
		must(t, c.List(ctx, pods, client.InNamespace(namespace)))
		seen := map[string]bool{}
		for _, p := range pods.Items {
			for _, ct := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
				for repo, digest := range want {
					if !strings.Contains(ct.Image, repo) {
						continue
					}
					seen[repo] = true
					if !strings.HasSuffix(ct.Image, "/"+repo+"@"+digest) {
						t.Errorf("%s/%s %s runs %s, want %s@%s", namespace, p.Name, ct.Name, ct.Image, repo, digest)
					}
				}
			}
		}
		for repo := range want {
			if !seen[repo] {
				t.Errorf("no pod in %s runs %s", namespace, repo)
			}
		}
	}
	runs(localenv.OperatorNamespace, map[string]string{localenv.ManagerRepository: manager})
	runs(ns, map[string]string{localenv.ConfirmerRepository: confirmer})

	// The registry's own log shows the node's pulls by digest, on both addresses.
	log, err := os.ReadFile(filepath.Join(env.ClusterDir(), "registry.log"))
	must(t, err)
	for _, pull := range []string{"GET /v2/" + localenv.ManagerRepository + "/manifests/" + manager, "GET /v2/" + localenv.ConfirmerRepository + "/manifests/" + confirmer} {
		if !strings.Contains(string(log), pull) {
			t.Errorf("the registry's log has no %q", pull)
		}
	}

	// Without the pull secret, the authenticated address refuses the pull.
	nosecret := testutil.CreateNamespace(ctx, t, c, "e2e-pull-")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nosecret, Name: "no-secret"}, Spec: corev1.PodSpec{
		AutomountServiceAccountToken: new(false),
		Containers: []corev1.Container{{Name: "c", Image: localenv.RegistryAuthHost + "/" + localenv.ConfirmerRepository + "@" + confirmer,
			ImagePullPolicy: corev1.PullAlways, Command: []string{"/confirmer", "--help"}}}}}
	must(t, c.Create(ctx, pod))
	var reason string
	wait(t, "a pull without the secret fails", func() bool {
		if c.Get(ctx, client.ObjectKeyFromObject(pod), pod) != nil || len(pod.Status.ContainerStatuses) == 0 || pod.Status.ContainerStatuses[0].State.Waiting == nil {
			return false
		}
		w := pod.Status.ContainerStatuses[0].State.Waiting
		reason = w.Reason + ": " + w.Message
		return w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff"
	})
	// containerd says "authorization failed: no basic auth credentials" after the registry's 401.
	if !strings.Contains(reason, "authorization failed") && !strings.Contains(reason, "401") {
		t.Errorf("the pull without the secret failed for another reason: %s", reason)
	}
	t.Logf("without the pull secret: %s", reason)

	// The signatures and SBOM attestations of both indexes verify (cosign's library, offline).
	out, err := env.VerifyImages(ctx)
	if err != nil {
		t.Fatalf("verifying the pushed images' signatures and SBOMs: %v\n%s", err, out)
	}
	if strings.Count(out, "verified signature") != 2 || strings.Count(out, "verified SBOM attestation") != 2 {
		t.Errorf("verify printed:\n%s", out)
	}
	t.Logf("%s", out)
}
