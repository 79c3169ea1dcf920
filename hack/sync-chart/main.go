// Command sync-chart regenerates the parts of the Helm chart that are derived from config/: one
// template per CRD in config/crd/bases (wrapped in `{{- if .Values.crds.install }}` and
// annotated `helm.sh/resource-policy: keep`), the manager ClusterRole and the approver
// ClusterRole, whose rules are exactly those of config/rbac/role.yaml and
// config/rbac/approver_role.yaml, and the webhook configurations of config/webhook/webhooks.yaml
// with the release's names, namespace, timeout and namespace selectors templated (webhooks.go),
// and the ValidatingAdmissionPolicies of config/admission-policies (admissionpolicies.go); and
// the OpenReports Report CRD as the pinned github.com/openreports/reports-api module publishes
// it (wrapped in `{{- if .Values.reports.installCRD }}`; it is not ours to edit).
//
// It is run by hack/sync-chart.sh (`make chart-sync`), and by test/install into a temporary
// chart directory to prove the committed chart is in sync.
//
//	go run ./hack/sync-chart [-config config] [-chart charts/gate-operator]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	// keepAnnotation stops `helm uninstall` from deleting the CRDs, and with them every
	// HarnessAgentPolicy and SessionConfirmer in the cluster.
	keepAnnotation = "helm.sh/resource-policy"
	keepValue      = "keep"
)

func main() {
	configDir := flag.String("config", "config", "the kustomize config directory holding crd/bases, rbac and webhook")
	chartDir := flag.String("chart", filepath.Join("charts", "gate-operator"), "the chart directory to write the generated templates into")
	flag.Parse()
	if err := run(*configDir, *chartDir); err != nil {
		fmt.Fprintf(os.Stderr, "sync-chart: %v\n", err)
		os.Exit(1)
	}
}

func run(configDir, chartDir string) error {
	files, err := render(configDir)
	if err != nil {
		return err
	}
	crdDir := filepath.Join(chartDir, "templates", "crds")
	if err := os.MkdirAll(crdDir, 0o755); err != nil {
		return err
	}
	// A CRD removed from config/ must disappear from the chart too.
	existing, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil {
		return err
	}
	for _, path := range existing {
		rel, _ := filepath.Rel(chartDir, path)
		if _, keep := files[filepath.ToSlash(rel)]; !keep {
			if err := os.Remove(path); err != nil {
				return err
			}
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(chartDir, filepath.FromSlash(name)), files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// render returns the generated chart files, keyed by their slash-separated path in the chart.
func render(configDir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	crdPaths, err := filepath.Glob(filepath.Join(configDir, "crd", "bases", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(crdPaths) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", filepath.Join(configDir, "crd", "bases"))
	}
	for _, path := range crdPaths {
		text, err := renderCRD(path)
		if err != nil {
			return nil, err
		}
		out["templates/crds/"+filepath.Base(path)] = text
	}
	reports, err := renderOpenReportsCRD()
	if err != nil {
		return nil, err
	}
	out["templates/openreports-crd.yaml"] = reports
	generated := []struct {
		name   string
		source string
		render func(configDir, source string) ([]byte, error)
	}{
		{"templates/clusterrole.yaml", "rbac/role.yaml", renderManagerRole},
		{approverTemplate, "rbac/approver_role.yaml", renderApproverRole},
		{webhooksTemplate, "webhook/webhooks.yaml", renderWebhooks},
		{admissionPoliciesTemplate, "admission-policies", renderAdmissionPolicies},
	}
	for _, g := range generated {
		text, err := g.render(configDir, g.source)
		if err != nil {
			return nil, err
		}
		out[g.name] = text
	}
	return out, nil
}

// openReportsModule publishes the Report CRD the posture Reports need; go.mod pins its version.
const openReportsModule = "github.com/openreports/reports-api"

// renderOpenReportsCRD renders the module's Report CRD as the chart's
// templates/openreports-crd.yaml, under reports.installCRD.
func renderOpenReportsCRD() ([]byte, error) {
	// go mod download, unlike go list -m, fetches the module when the cache lacks it.
	out, err := exec.Command("go", "mod", "download", "-json", openReportsModule).Output()
	if err != nil {
		return nil, fmt.Errorf("downloading %s (go mod download): %w", openReportsModule, err)
	}
	var mod struct{ Path, Version, Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, fmt.Errorf("%s is not in the module cache: %q", openReportsModule, out)
	}
	version, dir := mod.Path+"@"+mod.Version, mod.Dir
	const file = "config/crd/openreports.io_reports.yaml"
	return renderCRDWith(filepath.Join(dir, filepath.FromSlash(file)), version+" "+file, ".Values.reports.installCRD")
}

func renderCRD(path string) ([]byte, error) {
	return renderCRDWith(path, sourceName(path), ".Values.crds.install")
}

// renderCRDWith renders the CRD at path, named source in its header, under the value condition.
func renderCRDWith(path, source, condition string) ([]byte, error) {
	docs, err := readDocs(path)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%s: want exactly one document, found %d", path, len(docs))
	}
	var crd map[string]any
	if err := yaml.Unmarshal(docs[0], &crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if crd["kind"] != "CustomResourceDefinition" {
		return nil, fmt.Errorf("%s: kind is %v, want CustomResourceDefinition", path, crd["kind"])
	}
	meta, ok := crd["metadata"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: no metadata", path)
	}
	annotations, _ := meta["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
	}
	annotations[keepAnnotation] = keepValue
	meta["annotations"] = annotations
	body, err := yaml.Marshal(crd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := noTemplateDelimiters(path, body); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Code generated by `make chart-sync` from %s. DO NOT EDIT.\n", source)
	b.WriteString("{{- if " + condition + " }}\n")
	b.Write(body)
	b.WriteString("{{- end }}\n")
	return b.Bytes(), nil
}

// noTemplateDelimiters fails when generated text would be read by Helm as a template action.
// Nothing in config/ contains `{{` today; should a CRD description or CEL rule ever contain it,
// it has to be escaped (e.g. emitted as {{ "{{" }}), and this makes sure that is noticed rather
// than silently rendered or mis-parsed. A lone `}}` is plain text to Helm and is allowed.
func noTemplateDelimiters(path string, body []byte) error {
	if i := bytes.Index(body, []byte("{{")); i >= 0 {
		line := 1 + bytes.Count(body[:i], []byte("\n"))
		return fmt.Errorf("%s: contains the Helm template delimiter \"{{\" (line %d of the re-serialized YAML); escape it in hack/sync-chart before syncing", path, line)
	}
	return nil
}

// readDocs splits a YAML stream into its non-empty documents.
func readDocs(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if isBlank(doc) {
			continue
		}
		docs = append(docs, doc)
	}
}

// isBlank reports whether a YAML document holds nothing but whitespace, comments and `---`.
func isBlank(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && line != "---" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

// sourceName is the path named in the generated header. It is always given relative to the
// repository (config/...), whatever -config was, so output into a scratch chart compares equal.
func sourceName(path string) string {
	switch dir := filepath.Base(filepath.Dir(path)); dir {
	case "rbac", "webhook":
		return "config/" + dir + "/" + filepath.Base(path)
	}
	return "config/crd/bases/" + filepath.Base(path)
}

// generatedHeader is the first line of every generated file.
func generatedHeader(path string) string {
	return fmt.Sprintf("# Code generated by `make chart-sync` from %s. DO NOT EDIT.\n", sourceName(path))
}
