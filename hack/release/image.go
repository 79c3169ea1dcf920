package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// refNameAnnotation names an index in an OCI image layout's index.json (hack/images writes the
// image's reference there).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// imageSBOM returns the SBOM of the Go binaries in idx's images, read one at a time.
func imageSBOM(o sbomOptions, idx v1.ImageIndex) ([]byte, error) {
	apps, err := indexApplications(idx, o.version)
	if err != nil {
		return nil, err
	}
	return writeSBOM(o, apps)
}

// remoteIndex is the image index ref names, which must be by digest: the SBOM is of one
// image, and the same image gives the same bytes.
func remoteIndex(ctx context.Context, ref string, plainHTTP bool) (v1.ImageIndex, error) {
	d, err := name.NewDigest(ref, nameOptions(plainHTTP)...)
	if err != nil {
		return nil, fmt.Errorf("%w: sbom -image takes an image index by digest (REPO@sha256:...): %w", errUsage, err)
	}
	desc, err := remote.Get(d, remoteOptions(ctx)...)
	if err != nil {
		return nil, err
	}
	if !desc.MediaType.IsIndex() {
		return nil, fmt.Errorf("%s is a %s, not an image index", ref, desc.MediaType)
	}
	return desc.ImageIndex()
}

// layoutIndex is the image index of the OCI image layout at dir whose ref.name annotation is ref.
func layoutIndex(dir, ref string) (v1.ImageIndex, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	root, err := lp.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := root.IndexManifest()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, desc := range m.Manifests {
		if n := desc.Annotations[refNameAnnotation]; n != ref {
			names = append(names, n)
			continue
		}
		if !desc.MediaType.IsIndex() {
			return nil, fmt.Errorf("%s in %s is a %s, not an image index", ref, dir, desc.MediaType)
		}
		return root.ImageIndex(desc.Digest)
	}
	return nil, fmt.Errorf("%s has no index named %q (%s); it has %q", dir, ref, refNameAnnotation, names)
}

// indexApplications reads every Go binary of each platform's image in idx, sorted by platform
// and path as parseBinaries sorts binaries given on the command line.
func indexApplications(idx v1.ImageIndex, version string) ([]application, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	byPlatform := map[string][]application{}
	for _, desc := range m.Manifests {
		if !desc.MediaType.IsImage() {
			return nil, fmt.Errorf("the index lists a %s (%s); only images are read", desc.MediaType, desc.Digest)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return nil, err
		}
		platform, err := imagePlatform(desc, img)
		if err != nil {
			return nil, err
		}
		if platform == "unknown/unknown" { // BuildKit's attestation manifests: no files to run
			continue
		}
		if _, ok := byPlatform[platform]; ok {
			return nil, fmt.Errorf("the index has two images for %s", platform)
		}
		if byPlatform[platform], err = imageApplications(img, platform, version); err != nil {
			return nil, fmt.Errorf("%s (%s): %w", platform, desc.Digest, err)
		}
	}
	var apps []application
	for _, p := range slices.Sorted(maps.Keys(byPlatform)) {
		apps = append(apps, byPlatform[p]...)
	}
	if len(apps) == 0 {
		return nil, errors.New("no Go binaries in any of the index's images")
	}
	return apps, nil
}

// imagePlatform is os/arch[/variant] of the index's entry, or of the image's config when the
// index does not say.
func imagePlatform(desc v1.Descriptor, img v1.Image) (string, error) {
	p := desc.Platform
	if p == nil {
		cf, err := img.ConfigFile()
		if err != nil {
			return "", err
		}
		p = cf.Platform()
	}
	if p == nil || p.OS == "" || p.Architecture == "" {
		return "", fmt.Errorf("image %s names no platform", desc.Digest)
	}
	return strings.Join(slices.DeleteFunc([]string{p.OS, p.Architecture, p.Variant}, func(s string) bool { return s == "" }), "/"), nil
}

// imageApplications reads every Go binary in img's filesystem, by path. mutate.Extract
// flattens the layers as a container sees them: a later layer's file replaces an earlier one's,
// and whiteouts delete. Files are read one at a time into one buffer, so the largest file
// bounds the memory; files without Go build information are skipped.
func imageApplications(img v1.Image, platform, version string) ([]application, error) {
	files := mutate.Extract(img)
	defer files.Close()
	tr := tar.NewReader(files)
	var apps []application
	var buf []byte
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the image's files: %w", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		buf = slices.Grow(buf[:0], int(hdr.Size))[:hdr.Size]
		if _, err := io.ReadFull(tr, buf); err != nil {
			return nil, fmt.Errorf("reading %s: %w", hdr.Name, err)
		}
		b := binary{platform: platform, path: path.Clean("/" + hdr.Name), inImage: true}
		app, err := readBinary(b, buf, version)
		switch {
		case errors.Is(err, errNoBuildInfo):
			continue
		case err != nil:
			return nil, err
		}
		apps = append(apps, app)
	}
	// Within one platform, bom-refs are platform/path: this sorts by path.
	slices.SortFunc(apps, func(a, b application) int { return strings.Compare(a.component.BOMRef, b.component.BOMRef) })
	return apps, nil
}
