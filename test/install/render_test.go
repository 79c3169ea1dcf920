package install_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/intutic/gate-operator/internal/testutil"
)

const (
	helmVersion = "v4.3.2"
	helmPackage = "helm.sh/helm/v4/cmd/helm"
)

var (
	helmOnce sync.Once
	helmErr  error

	inputsOnce sync.Once
	inputsErr  error
)

// helm runs bin/helm in the repository root, installing it first if it is missing.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(root, "bin", "helm")
	helmOnce.Do(func() { helmErr = testutil.InstallTool(root, bin, helmPackage, helmVersion, "about 2 minutes") })
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	// Keep helm's cache, config and data out of $HOME.
	scratch := filepath.Join(os.TempDir(), "install-test-helm-home")
	for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, filepath.Join(scratch, strings.ToLower(strings.TrimPrefix(v, "HELM_"))))
	}
	return run(t, root, bin, args...)
}

// helmTemplate renders the chart as release gate-operator in gate-system.
func helmTemplate(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	args = append([]string{"template", release, "charts/gate-operator", "--namespace", namespace}, args...)
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm %s failed: %v\n%s", strings.Join(args, " "), err, out)
	}
	return parseManifests(t, "helm template", []byte(out))
}

func run(t *testing.T, dir, name string, args ...string) (string, error) {
	t.Helper()
	inputsOnce.Do(func() { inputsErr = readInputs() })
	if inputsErr != nil {
		t.Fatalf("reading the install inputs: %v", inputsErr)
	}
	return testutil.Run(t, dir, name, args...)
}

// readInputs reads every file helm, kubectl and hack/sync-chart read on the tests' behalf.
// `go test` caches a passing result until a file the test process itself opened changes; the
// subprocesses' reads are invisible to it, so without this an edited chart template could
// still report the cached pass. It must run inside m.Run (where the test log is recorded), so
// run calls it before the first subprocess.
func readInputs() error {
	for _, dir := range []string{"charts", "config", filepath.Join("hack", "sync-chart")} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			_, err = os.ReadFile(path)
			return err
		})
		if err != nil {
			return err
		}
	}
	for _, file := range []string{"hack/sync-chart.sh", "hack/install-tool.sh", "bin/helm.version"} {
		_, _ = os.Stat(filepath.Join(root, file)) // may not exist yet
		_, _ = os.ReadFile(filepath.Join(root, file))
	}
	return nil
}

// parseManifests splits a YAML stream into objects, strictly: a duplicate key (such as a label
// given twice by two template helpers) is an error, not a silent override.
func parseManifests(t *testing.T, source string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	docs, err := splitYAML(data)
	if err != nil {
		t.Fatalf("%s: %v", source, err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range docs {
		var m map[string]any
		if err := yaml.UnmarshalStrict(doc, &m); err != nil {
			t.Fatalf("%s: %v in\n%s", source, err, doc)
		}
		o := &unstructured.Unstructured{Object: m}
		if o.GetAPIVersion() == "" || o.GetKind() == "" || o.GetName() == "" {
			t.Fatalf("%s: a document without apiVersion, kind or name:\n%s", source, doc)
		}
		objs = append(objs, o)
	}
	return objs
}

func splitYAML(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		blank := true
		for _, line := range strings.Split(string(doc), "\n") {
			if line = strings.TrimSpace(line); line != "" && line != "---" && !strings.HasPrefix(line, "#") {
				blank = false
				break
			}
		}
		if !blank {
			docs = append(docs, doc)
		}
	}
}

// generatedCRDs reads config/crd/bases, by CRD name.
func generatedCRDs(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs in config/crd/bases (%v)", err)
	}
	crds := map[string]*unstructured.Unstructured{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range parseManifests(t, path, data) {
			crds[o.GetName()] = o
		}
	}
	return crds
}

func writeValues(t *testing.T, values string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	writeFile(t, path, values)
	return path
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
