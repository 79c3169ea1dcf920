package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	ggcrmutate "github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
)

// tinyBinaries are testdata/tiny built for linux/amd64 and linux/arm64, by architecture.
var tinyBinaries = sync.OnceValues(func() (map[string]string, error) {
	bins := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		bins[arch] = filepath.Join(binDir, "linux-"+arch, "tiny")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bins[arch], "./testdata/tiny")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build ./testdata/tiny for linux/%s: %w\n%s", arch, err, out)
		}
	}
	return bins, nil
})

// tarEntry is a file of a test image's layer: a directory (name ending in /), a symlink
// (link set) or a regular file with the bytes of data, or of the file at path.
type tarEntry struct {
	name, data, path, link string
}

// tarLayer is a gzipped layer of the entries.
func tarLayer(t *testing.T, entries ...tarEntry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg}
		data := []byte(e.data)
		switch {
		case strings.HasSuffix(e.name, "/"):
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		case e.link != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.link
		case e.path != "":
			var err error
			if data, err = os.ReadFile(e.path); err != nil {
				t.Fatal(err)
			}
			hdr.Mode = 0o755
		}
		hdr.Size = int64(len(data))
		if hdr.Typeflag != tar.TypeReg {
			hdr.Size, data = 0, nil
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil },
		tarball.WithMediaType(ggcrtypes.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		t.Fatal(err)
	}
	return layer
}

// tinyIndex is a two-platform index whose images hold testdata/tiny for their architecture at
// /tiny, beside files that are not Go binaries. Its first layer holds the other
// architecture's tiny at /tiny and this one's at /removed; the second replaces /tiny and
// deletes /removed, so that an SBOM read from the first layer, or from both as separate
// trees, is wrong. With onlyFirstLayer, the images are the first layer alone.
func tinyIndex(t *testing.T, onlyFirstLayer bool) v1.ImageIndex {
	t.Helper()
	bins, err := tinyBinaries()
	if err != nil {
		t.Fatal(err)
	}
	idx := v1.ImageIndex(empty.Index)
	for _, arch := range []string{"amd64", "arm64"} {
		other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[arch]
		layers := []v1.Layer{tarLayer(t,
			tarEntry{name: "etc/"},
			tarEntry{name: "etc/passwd", data: "nonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n"},
			tarEntry{name: "etc/ssl/certs/ca-certificates.crt", data: "-----BEGIN CERTIFICATE-----\n"},
			tarEntry{name: "tiny", path: bins[other]},
			tarEntry{name: "removed", path: bins[arch]},
		)}
		if !onlyFirstLayer {
			layers = append(layers, tarLayer(t,
				tarEntry{name: "./tiny", path: bins[arch]},
				tarEntry{name: ".wh.removed"},
				tarEntry{name: "bin/"},
				tarEntry{name: "bin/tiny", link: "/tiny"},
			))
		}
		idx = appendPlatform(t, idx, arch, layers...)
	}
	return ggcrmutate.IndexMediaType(idx, ggcrtypes.OCIImageIndex)
}

// withoutImagePaths decodes an SBOM, checks whether each application names its path in the
// image, /<its name>, drops those properties and encodes it again as the sbom command does.
func withoutImagePaths(t *testing.T, raw []byte, fromImage bool) []byte {
	t.Helper()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(raw), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	for i, c := range *bom.Components {
		if c.Type != cdx.ComponentTypeApplication {
			continue
		}
		if got, want := property(c, "image.path"), map[bool]string{true: "/" + c.Name}[fromImage]; got != want {
			t.Errorf("%s: image.path %q, want %q", c.BOMRef, got, want)
		}
		props := slices.DeleteFunc(slices.Clone(*c.Properties), func(p cdx.Property) bool { return p.Name == "image.path" })
		(*bom.Components)[i].Properties = &props
	}
	var buf bytes.Buffer
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true).SetEscapeHTML(false).Encode(&bom); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSBOMFromImage(t *testing.T) {
	bins, err := tinyBinaries()
	if err != nil {
		t.Fatal(err)
	}
	repo := startRegistry(t) + "/intutic/gate-confirmer"
	digest := pushIndexAs(t, repo, "tiny", tinyIndex(t, false)).String()
	layoutDir := t.TempDir()
	lp, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	const layoutRef = "ghcr.io/intutic/gate-confirmer:9.9.9"
	if err := lp.AppendIndex(tinyIndex(t, false), layout.WithAnnotations(map[string]string{refNameAnnotation: layoutRef})); err != nil {
		t.Fatal(err)
	}

	sbom := func(args ...string) []byte {
		t.Helper()
		out, err := release(t, append([]string{"sbom", "-name", "ghcr.io/intutic/gate-confirmer", "-version", "9.9.9", "-epoch", "1700000000"}, args...)...)
		if err != nil {
			t.Fatalf("sbom %q: %v", args, err)
		}
		return []byte(out)
	}
	fromImage := sbom("-image", digest)
	if again := sbom("-image", digest); !bytes.Equal(again, fromImage) {
		t.Fatalf("two runs over the same image wrote different SBOMs:\n%s\n---\n%s", fromImage, again)
	}
	if fromLayout := sbom("-layout", layoutDir, "-ref", layoutRef); !bytes.Equal(fromLayout, fromImage) {
		t.Errorf("the same index from the OCI layout and from the registry gave different SBOMs:\n%s\n---\n%s", fromLayout, fromImage)
	}

	// The same binaries given as files: the same SBOM but for the image.path properties.
	fromFiles := sbom("linux/amd64="+bins["amd64"], "linux/arm64="+bins["arm64"])
	if got := withoutImagePaths(t, fromImage, true); !bytes.Equal(got, withoutImagePaths(t, fromFiles, false)) {
		t.Errorf("the SBOM read from the image, less its image.path properties, is not the one read from the binaries:\n%s\n---\n%s", got, fromFiles)
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(fromImage), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, c := range *bom.Components {
		refs = append(refs, c.BOMRef)
	}
	// Only /tiny of the last layer: not /removed, nor the symlink, passwd or the CA bundle.
	if want := []string{"linux/amd64/tiny", "linux/arm64/tiny"}; !slices.Equal(refs, want) {
		t.Errorf("components %q, want %q", refs, want)
	}

	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "by tag", args: []string{"-image", repo + ":tiny"}, wantErr: "by digest"},
		{name: "one layer", args: []string{"-image", pushIndexAs(t, repo, "one-layer", tinyIndex(t, true)).String()}, wantErr: "/tiny is built for linux/arm64, not linux/amd64"},
		{name: "unknown ref", args: []string{"-layout", layoutDir, "-ref", "ghcr.io/intutic/gate-confirmer:0"}, wantErr: `has no index named "ghcr.io/intutic/gate-confirmer:0"`},
		{name: "-layout without -ref", args: []string{"-layout", layoutDir}, wantErr: "-layout and -ref together"},
		{name: "an image and binaries", args: []string{"-image", digest, "linux/amd64=" + bins["amd64"]}, wantErr: "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := release(t, append([]string{"sbom", "-name", "x", "-version", "1", "-epoch", "0"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("sbom %q: %v, want an error containing %q", tc.args, err, tc.wantErr)
			}
		})
	}
}
