package localenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The local registry (hack/registry, started by hack/lib/node.sh): containerd's hosts.toml
// makes it the server of every registry host, so ghcr.io/intutic/... is pulled from
// 127.0.0.1:<RegistryPort>; images named RegistryAuthHost/... are pulled from its other
// address, which answers only with the credentials of a pull secret.
const (
	// RegistryAuthHost is the registry name containerd sends to the authenticated address.
	RegistryAuthHost = "registry.gate.test"
	// PullSecret is the dockerconfigjson Secret InstallChart creates in OperatorNamespace for
	// RegistryAuthHost and names in the chart's imagePullSecrets.
	PullSecret = "gate-registry"
	// ChartRepository is where InstallChart pushes this tree's chart, under the registry.
	ChartRepository = "intutic/charts"
	// ManagerRepository and ConfirmerRepository are the images' repository paths.
	ManagerRepository   = "intutic/gate-operator"
	ConfirmerRepository = "intutic/gate-confirmer"
)

// Registry is the local registry's open address, host:port.
func (e *Env) Registry() string { return fmt.Sprintf("127.0.0.1:%d", e.registryPort) }

// ImageDigests are the index digests of the images the node's start pushed to the registry,
// by image reference (ghcr.io/intutic/gate-operator:v0.1.0 and so on), as hack/registry push
// printed them.
func (e *Env) ImageDigests() (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(e.ClusterDir(), "node", "images.txt"))
	if err != nil {
		return nil, fmt.Errorf("reading the pushed images' digests: %w", err)
	}
	out := map[string]string{}
	for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
		if ref, digest, ok := strings.Cut(sc.Text(), " "); ok {
			out[ref] = digest
		}
	}
	return out, nil
}

// ImageDigest is the index digest of the image repository (ManagerRepository or
// ConfirmerRepository) the node's start pushed.
func (e *Env) ImageDigest(repository string) (string, error) {
	digests, err := e.ImageDigests()
	if err != nil {
		return "", err
	}
	for ref, d := range digests {
		if t, err := name.NewTag(ref); err == nil && t.RepositoryStr() == repository {
			return d, nil
		}
	}
	return "", fmt.Errorf("the local registry holds no %s (pushed: %v)", repository, digests)
}

// ChartSource is where InstallChart installed this tree's chart from: the OCI reference and
// version, and the chart's digest as helm push printed it.
type ChartSource struct {
	Ref, Version, Digest string
}

// pushChart packages charts/gate-operator and pushes it to the local registry as an OCI
// artifact (helm package, helm push).
func (e *Env) pushChart(ctx context.Context) (ChartSource, error) {
	dir, err := os.MkdirTemp(e.Dir, "chart-")
	if err != nil {
		return ChartSource{}, err
	}
	defer os.RemoveAll(dir)
	helm := filepath.Join(e.Root, "bin", "helm")
	out, err := exec.CommandContext(ctx, helm, "package", filepath.Join(e.Root, "charts", "gate-operator"), "-d", dir).CombinedOutput()
	if err != nil {
		return ChartSource{}, fmt.Errorf("helm package: %w: %s", err, out)
	}
	pkgs, _ := filepath.Glob(filepath.Join(dir, "gate-operator-*.tgz"))
	if len(pkgs) != 1 {
		return ChartSource{}, fmt.Errorf("helm package wrote %v, want one gate-operator-<version>.tgz", pkgs)
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(pkgs[0]), "gate-operator-"), ".tgz")
	repo := "oci://" + e.Registry() + "/" + ChartRepository
	out, err = exec.CommandContext(ctx, helm, "push", pkgs[0], repo, "--plain-http").CombinedOutput()
	if err != nil {
		return ChartSource{}, fmt.Errorf("helm push: %w: %s", err, out)
	}
	digest := regexp.MustCompile(`Digest: (sha256:[0-9a-f]{64})`).FindSubmatch(out)
	if digest == nil {
		return ChartSource{}, fmt.Errorf("helm push printed no digest: %s", out)
	}
	return ChartSource{Ref: repo + "/gate-operator", Version: version, Digest: string(digest[1])}, nil
}

// registryValues are the helm arguments that make the chart run the pushed images by digest:
// the manager from RegistryAuthHost with the pull secret, the confirmer (and the containers the
// webhook injects) from ghcr.io, which needs none.
func (e *Env) registryValues() ([]string, error) {
	manager, err := e.ImageDigest(ManagerRepository)
	if err != nil {
		return nil, err
	}
	confirmer, err := e.ImageDigest(ConfirmerRepository)
	if err != nil {
		return nil, err
	}
	return append([]string{"--plain-http"}, helmSet("image.repository="+RegistryAuthHost+"/"+ManagerRepository, "image.digest="+manager,
		"confirmerImage.digest="+confirmer, "imagePullSecrets[0].name="+PullSecret)...), nil
}

// helmSet is helm's --set for each of values.
func helmSet(values ...string) []string {
	var args []string
	for _, v := range values {
		args = append(args, "--set", v)
	}
	return args
}

// ensurePullSecret creates OperatorNamespace and the dockerconfigjson Secret PullSecret holding
// the registry's credentials for RegistryAuthHost (hack/lib/node.sh wrote them).
func (e *Env) ensurePullSecret(ctx context.Context) error {
	creds, err := os.ReadFile(filepath.Join(e.ClusterDir(), "node", "registry", "credentials"))
	if err != nil {
		return fmt.Errorf("reading the local registry's credentials: %w", err)
	}
	user, password, _ := strings.Cut(strings.TrimSpace(string(creds)), ":")
	config, err := json.Marshal(map[string]any{"auths": map[string]any{RegistryAuthHost: map[string]string{
		"username": user, "password": password, "auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}}})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OperatorNamespace}}
	if err := e.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: PullSecret, Namespace: OperatorNamespace},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: config}}
	if err := e.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// PushImage pushes the one image of a docker-archive tarball to the local registry under its
// own repository path and tag (the repository's host is dropped: every host's server is the
// local registry), where the node pulls it.
func (e *Env) PushImage(ctx context.Context, archive string) error {
	tag, img, err := archiveImage(archive)
	if err != nil {
		return err
	}
	dst, err := name.NewTag(e.Registry() + "/" + tag.RepositoryStr() + ":" + tag.TagStr())
	if err != nil {
		return err
	}
	return remote.Write(dst, img, remote.WithContext(ctx))
}

// VerifyImages verifies the cosign signature and the signed SBOM attestation of each image the
// node's start pushed, with the key pair it generated and the SBOMs it wrote (bin/release verify:
// cosign's library, offline), and returns what verify printed.
func (e *Env) VerifyImages(ctx context.Context) (string, error) {
	digests, err := e.ImageDigests()
	if err != nil {
		return "", err
	}
	node := filepath.Join(e.ClusterDir(), "node")
	var out strings.Builder
	for ref, digest := range digests {
		tag, err := name.NewTag(ref)
		if err != nil {
			return "", err
		}
		image := e.Registry() + "/" + tag.RepositoryStr() + "@" + digest
		sbom := filepath.Join(node, "sbom", filepath.Base(tag.RepositoryStr())+".cdx.json")
		cmd := exec.CommandContext(ctx, filepath.Join(e.Root, "bin", "release"), "verify",
			"-key", filepath.Join(node, "release-key", "cosign.pub"), "-sbom", sbom, image)
		b, err := cmd.CombinedOutput()
		out.Write(b)
		if err != nil {
			return out.String(), fmt.Errorf("bin/release verify %s: %w", image, err)
		}
	}
	return out.String(), nil
}
