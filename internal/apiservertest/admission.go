package apiservertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InstallAdmissionPolicies creates the ValidatingAdmissionPolicies and bindings of
// config/admission-policies, as the chart installs them. The API server enforces them some
// time later (it type-checks and loads them first): a test of them waits until a write they
// refuse is refused.
func InstallAdmissionPolicies(ctx context.Context, c client.Client) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	paths, err := filepath.Glob(filepath.Join(root, "config", "admission-policies", "*.yaml"))
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("no admission policies in %s", filepath.Join(root, "config", "admission-policies"))
	}
	for _, path := range paths {
		if filepath.Base(path) == "kustomization.yaml" {
			continue
		}
		if err := installFile(ctx, c, path); err != nil {
			return err
		}
	}
	return nil
}

func installFile(ctx context.Context, c client.Client, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(o.Object) == 0 {
			continue
		}
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("%s: %s %s: %w", path, o.GetKind(), o.GetName(), err)
		}
	}
}
