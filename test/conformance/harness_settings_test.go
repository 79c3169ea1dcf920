//go:build conformance

package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/gateapi"
)

// tsPrelude declares the types the harness files are checked against, from the pinned
// @ai-sdk/harness: HarnessAgentSettings for a harness whose built-in tools are the
// cross-harness common names (so inactiveTools must name one of them), and the parameter of
// the sandbox session's setNetworkPolicy.
const tsPrelude = `import type { HarnessAgentAdapter, HarnessAgentBuiltinTools, HarnessAgentSettings } from "@ai-sdk/harness/agent";
import type { HarnessV1NetworkSandboxSession } from "@ai-sdk/harness";
declare const harness: HarnessAgentAdapter<HarnessAgentBuiltinTools>;
type Settings = HarnessAgentSettings<typeof harness>;
type NetworkPolicy = Parameters<NonNullable<HarnessV1NetworkSandboxSession["setNetworkPolicy"]>>[0];
`

// tsCase is one declaration of the checked file, value as typ, on a line of its own. A
// control must fail with an error that names its field.
type tsCase struct {
	name, typ, value, control string
}

// TestHarnessSettingsTypeCheck has the TypeScript compiler check every shape of the bundle's
// harness files, and what GET /v1/harness/settings answers, against the real @ai-sdk/harness
// types: harness-settings.json spread into HarnessAgentSettings, harness-network-policy.json
// passed to setNetworkPolicy. Each value is an object literal, so a field the type lacks is an
// excess-property error on its case's line; two controls hold the check to that.
func TestHarnessSettingsTypeCheck(t *testing.T) {
	var cs []tsCase
	files := func(what, settingsName, policyName string, settings, policy []byte) {
		cs = append(cs,
			tsCase{name: what + ": " + settingsName + " spreads into HarnessAgentSettings", typ: "Settings", value: withHarness(t, settings)},
			tsCase{name: what + ": " + policyName + " is the HarnessV1NetworkPolicy setNetworkPolicy takes", typ: "NetworkPolicy", value: compact(t, policy)})
	}
	bundle := func(what string, b bootstrap.Bundle, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		files(what, bootstrap.KeyHarnessSettings, bootstrap.KeyHarnessNetworkPolicy, []byte(b.Data[bootstrap.KeyHarnessSettings]), []byte(b.Data[bootstrap.KeyHarnessNetworkPolicy]))
	}

	p := harnessSamplePolicy(t)
	sample, err := bootstrap.Render(&p.Spec, nil, bootstrap.Options{})
	bundle("the sample policy", sample, err)
	denyAll := p.Spec.DeepCopy()
	denyAll.Egress, denyAll.FilterBash, denyAll.Tools, denyAll.PermissionMode = gatev1.EgressSpec{}, ptr.To(false), gatev1.StaticToolApprovals{}, gatev1.PermissionModeAllowReads
	b, err := bootstrap.Render(denyAll, nil, bootstrap.Options{})
	bundle("deny-all egress, bash not filtered, no tool approvals", b, err)
	cidrs := p.Spec.DeepCopy()
	cidrs.Egress = gatev1.EgressSpec{AllowedCIDRs: []gatev1.CIDR{"10.0.0.0/8"}, DeniedCIDRs: []gatev1.CIDR{"10.1.0.0/16"}}
	b, err = bootstrap.Render(cidrs, nil, bootstrap.Options{})
	bundle("allowed CIDRs only", b, err)
	b, err = bootstrap.RenderBlocking(p.Spec.WorkspaceID, nil, bootstrap.Options{})
	bundle("the bundle that blocks every call", b, err)

	served := harnessSettingsServed(t, sample)
	files("GET /v1/harness/settings", "settings", "networkPolicy", served.Settings, served.NetworkPolicy)

	// The controls, fixed literals that must be refused naming the field: harness-settings.json
	// as it was before the split, and a network policy with a field the type lacks.
	cs = append(cs,
		tsCase{name: "control: the pre-split harness-settings.json, with networkPolicy, is refused as HarnessAgentSettings", typ: "Settings", value: `{ harness, "permissionMode":"allow-reads","networkPolicy":{"mode":"deny-all"} }`, control: `'"networkPolicy"'`},
		tsCase{name: "control: a network policy with a field HarnessV1NetworkPolicy lacks is refused", typ: "NetworkPolicy", value: `{"mode":"deny-all","allowedHosts":["github.com"]}`, control: `'"allowedHosts"'`})

	errs, stray := typeCheck(t, cs)
	record(t, "@ai-sdk/harness", "tsc "+version("typescript")+" resolves the pinned types (no error outside the cases)", len(stray) == 0, strings.Join(stray, "\n"))
	for i, c := range cs {
		got := strings.Join(errs[i], "\n")
		if c.control == "" {
			record(t, "@ai-sdk/harness", c.name, got == "", got)
		} else {
			record(t, "@ai-sdk/harness", c.name, strings.Contains(got, c.control), "want an error naming "+c.control+", got: "+got)
		}
	}
}

// tscError is a diagnostic line of tsc --pretty false: file(line,col): error TSnnnn: message.
var tscError = regexp.MustCompile(`^(\S+)\((\d+),\d+\): `)

// typeCheck writes the cases into one module beside a link to the suite's node_modules, runs
// the pinned tsc on it, and returns each case's errors and the errors on no case's line.
func typeCheck(t *testing.T, cs []tsCase) (errs [][]string, stray []string) {
	t.Helper()
	dir := t.TempDir()
	modules, err := filepath.Abs("node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	src := tsPrelude
	first := strings.Count(src, "\n") + 1 // the line of cs[0]
	for i, c := range cs {
		src += fmt.Sprintf("export const c%d: %s = %s;\n", i, c.typ, c.value)
	}
	tsconfig := `{"compilerOptions": {"strict": true, "noEmit": true, "module": "nodenext", "moduleResolution": "nodenext", "target": "es2022", "skipLibCheck": true}, "files": ["check.mts"]}`
	for name, content := range map[string]string{"check.mts": src, "tsconfig.json": tsconfig} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(modules, ".bin", "tsc"), "-p", "tsconfig.json", "--pretty", "false")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		t.Fatalf("running tsc: %v", runErr)
	}
	errs = make([][]string, len(cs))
	last := &stray
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		switch m := tscError.FindStringSubmatch(line); {
		case line == "":
		case m == nil: // the continuation of the diagnostic before
			*last = append(*last, line)
		default:
			n, _ := strconv.Atoi(m[2])
			if i := n - first; m[1] == "check.mts" && i >= 0 && i < len(cs) {
				last = &errs[i]
			} else {
				last = &stray
			}
			*last = append(*last, line)
		}
	}
	if runErr != nil && len(stray) == 0 && !hasAny(errs) {
		stray = append(stray, "tsc failed without a diagnostic: "+out.String())
	}
	return errs, stray
}

func hasAny(errs [][]string) bool {
	for _, e := range errs {
		if len(e) > 0 {
			return true
		}
	}
	return false
}

// withHarness turns a settings object into the object literal an integrator writes, its
// fields beside the harness: {harness, ...settings} with the fields written out, so the
// compiler checks each for excess.
func withHarness(t *testing.T, settings []byte) string {
	t.Helper()
	inner := strings.TrimSuffix(strings.TrimPrefix(compact(t, settings), "{"), "}")
	if inner == "" {
		return "{ harness }"
	}
	return "{ harness, " + inner + " }"
}

// compact is a JSON object on one line: one case, one line.
func compact(t *testing.T, data []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil || !bytes.HasPrefix(buf.Bytes(), []byte("{")) {
		t.Fatalf("not a JSON object (%v): %s", err, data)
	}
	return buf.String()
}

// harnessSettingsServed mounts a bundle's files as the confirmer reads them and returns what
// GET /v1/harness/settings answers.
func harnessSettingsServed(t *testing.T, b bootstrap.Bundle) (served struct{ Settings, NetworkPolicy json.RawMessage }) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range b.Data {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	api := &gateapi.API{Gate: loadGate(t, nil), HarnessSettings: filepath.Join(dir, bootstrap.KeyHarnessSettings), Log: logr.Discard()}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/harness/settings")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&served); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/harness/settings: %d %s (%v)", resp.StatusCode, raw, err)
	}
	return served
}

// harnessSamplePolicy reads config/samples' HarnessAgentPolicy.
func harnessSamplePolicy(t *testing.T) *gatev1.HarnessAgentPolicy {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "gate_v1alpha1_harnessagentpolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := &gatev1.HarnessAgentPolicy{}
	if err := yaml.UnmarshalStrict(raw, p); err != nil {
		t.Fatal(err)
	}
	return p
}
