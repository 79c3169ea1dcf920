package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"go.uber.org/goleak"
)

// otherArch is an architecture the test does not run on, for a second platform.
var otherArch = map[bool]string{true: "arm64", false: "amd64"}[runtime.GOARCH == "amd64"]

// binDir holds the binaries the tests build; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "release-test-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.RemoveAll(dir); os.Exit(code) }))
}

// testBinaries are two real Go binaries: this test (its build information lists the modules it
// is built with, cosign among them) for the host's platform, and testdata/tiny cross-compiled
// for another. It returns the sbom command's OS/ARCH=BINARY arguments.
var testBinaries = sync.OnceValues(func() ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	tiny := filepath.Join(binDir, "tiny")
	cmd := exec.Command("go", "build", "-trimpath", "-o", tiny, "./testdata/tiny")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+otherArch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./testdata/tiny for linux/%s: %w\n%s", otherArch, err, out)
	}
	return []string{runtime.GOOS + "/" + runtime.GOARCH + "=" + self, "linux/" + otherArch + "=" + tiny}, nil
})

// release runs the command line, as `go run ./hack/release args...` would.
func release(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	if stderr.Len() > 0 {
		t.Logf("release %s: stderr: %s", args[0], stderr.String())
	}
	return stdout.String(), err
}

// writeTestSBOM writes the SBOM of the test binaries to dir/name.
func writeTestSBOM(t *testing.T, dir, name string, bins []string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	args := append([]string{"sbom", "-name", "ghcr.io/intutic/gate-operator", "-version", "9.9.9", "-epoch", "1700000000", "-o", path}, bins...)
	if _, err := release(t, args...); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSBOM(t *testing.T) {
	bins, err := testBinaries()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	first := writeTestSBOM(t, dir, "first.json", bins)
	second := writeTestSBOM(t, dir, "second.json", []string{bins[1], bins[0]}) // argument order does not matter
	a, _ := os.ReadFile(first)
	b, _ := os.ReadFile(second)
	if !bytes.Equal(a, b) {
		t.Fatalf("two runs over the same binaries wrote different SBOMs:\n%s\n---\n%s", a, b)
	}

	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(a), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(bom.SerialNumber) {
		t.Errorf("serialNumber %q is not a version 5 UUID URN", bom.SerialNumber)
	}
	if bom.Metadata.Timestamp != "2023-11-14T22:13:20Z" || bom.Metadata.Component.Name != "ghcr.io/intutic/gate-operator" || bom.Metadata.Component.Version != "9.9.9" {
		t.Errorf("metadata: timestamp %s, component %s %s", bom.Metadata.Timestamp, bom.Metadata.Component.Name, bom.Metadata.Component.Version)
	}

	byRef := map[string]cdx.Component{}
	var refs []string
	for _, c := range *bom.Components {
		byRef[c.BOMRef] = c
		refs = append(refs, c.BOMRef)
	}
	host := runtime.GOOS + "/" + runtime.GOARCH
	self := byRef[host+"/"+filepath.Base(strings.SplitN(bins[0], "=", 2)[1])]
	tiny := byRef["linux/"+otherArch+"/tiny"]
	if want := "pkg:golang/github.com/intutic/gate-operator/hack/release@9.9.9?goarch=" + runtime.GOARCH + "&goos=" + runtime.GOOS; self.PackageURL != want || self.Type != cdx.ComponentTypeApplication || property(self, "platform") != host {
		t.Errorf("the test binary's component: purl %q type %s platform %q; want purl %q, an application on %s", self.PackageURL, self.Type, property(self, "platform"), want, host)
	}
	if want := "pkg:golang/github.com/intutic/gate-operator/hack/release@9.9.9?goarch=" + otherArch + "&goos=linux#testdata/tiny"; tiny.PackageURL != want || property(tiny, "platform") != "linux/"+otherArch {
		t.Errorf("testdata/tiny's component: purl %q platform %q; want %q on linux/%s", tiny.PackageURL, property(tiny, "platform"), want, otherArch)
	}
	cosign := byRef["pkg:golang/github.com/sigstore/cosign/v3@v3.1.3"]
	if cosign.Type != cdx.ComponentTypeLibrary || cosign.Name != "github.com/sigstore/cosign/v3" || !strings.HasPrefix(property(cosign, "go.module.sum"), "h1:") {
		t.Errorf("cosign's component: %+v; want a library with its h1: sum", cosign)
	}
	// Applications first, then libraries, each sorted.
	apps, libs := refs[:2], refs[2:]
	if !slices.IsSorted(apps) || !slices.IsSorted(libs) || byRef[libs[0]].Type != cdx.ComponentTypeLibrary {
		t.Errorf("components are not the two applications then the libraries, each sorted: %q", refs)
	}
	deps := map[string][]string{}
	for _, d := range *bom.Dependencies {
		deps[d.Ref] = *d.Dependencies
	}
	if !slices.Contains(deps[self.BOMRef], cosign.BOMRef) || len(deps[tiny.BOMRef]) != 0 || len(deps["ghcr.io/intutic/gate-operator"]) != 2 {
		t.Errorf("dependencies: %v", deps)
	}
}

func TestSBOMRefusesAMislabelledBinary(t *testing.T) {
	bins, err := testBinaries()
	if err != nil {
		t.Fatal(err)
	}
	tiny := strings.SplitN(bins[1], "=", 2)[1]
	_, err = release(t, "sbom", "-name", "x", "-version", "1", "-epoch", "0", runtime.GOOS+"/"+runtime.GOARCH+"="+tiny)
	if err == nil || !strings.Contains(err.Error(), "is built for linux/"+otherArch) {
		t.Errorf("an arm64 binary given as %s/%s: got %v, want an error naming its platform", runtime.GOOS, runtime.GOARCH, err)
	}
	if _, err := release(t, "sbom", "-name", "x", "-version", "1", bins[0]); err == nil {
		t.Error("no -epoch and no SOURCE_DATE_EPOCH: got no error")
	}
}

func property(c cdx.Component, name string) string {
	if c.Properties != nil {
		for _, p := range *c.Properties {
			if p.Name == name {
				return p.Value
			}
		}
	}
	return ""
}
