package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// platforms are the architectures of each product image's index, in the index's order.
var platforms = []string{"amd64", "arm64"}

// layoutDir is the OCI image layout under -out that holds the indexes.
const layoutDir = "oci"

// writeIndexes writes each product image's index into a fresh OCI image layout at
// <out>/oci, its binaries for each of platforms from bins, and its linux/<arch> image as a
// docker-archive at <out>/<name>.tar; then prints "<ref> <index digest>" for each.
func writeIndexes(specs []imageSpec, src *source, arch string, ca []byte, bins map[string]string, out string, stdout, progress io.Writer) error {
	// index.json only grows: a layout written over the last one would keep its indexes.
	tmp, err := os.MkdirTemp(out, "."+layoutDir+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	lp, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	var printed []string
	for _, spec := range specs {
		idx, err := writeIndex(spec, src, arch, ca, bins, out, progress)
		if err != nil {
			return fmt.Errorf("image %s: %w", spec.name, err)
		}
		ref := map[string]string{
			"org.opencontainers.image.ref.name": spec.ref,
			// What containerd names an image by on import (`ctr images import`), before ref.name.
			"io.containerd.image.name": spec.ref,
		}
		if err := lp.AppendIndex(idx, layout.WithAnnotations(ref)); err != nil {
			return err
		}
		digest, err := idx.Digest()
		if err != nil {
			return err
		}
		printed = append(printed, spec.ref+" "+digest.String())
	}
	dir := filepath.Join(out, layoutDir)
	fmt.Fprintf(progress, "writing %s (OCI image layout: the indexes, named by their references)\n", dir)
	if err := readable(tmp); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	for _, line := range printed {
		fmt.Fprintln(stdout, line)
	}
	return nil
}

// writeIndex builds spec's image for each of platforms and their index, and writes the
// linux/<arch> one as a docker-archive from the same layer.
func writeIndex(spec imageSpec, src *source, arch string, ca []byte, bins map[string]string, out string, progress io.Writer) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, p := range platforms {
		blob, err := layerBlob(spec, src, ca, bins[p])
		if err != nil {
			return nil, err
		}
		img, err := newImage(spec, src, p, blob, ociTypes)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: p}}})
		if p != arch {
			continue
		}
		archive, err := newImage(spec, src, p, blob, dockerTypes)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(out, spec.name+".tar")
		if err := writeArchive(spec.ref, archive, path); err != nil {
			return nil, err
		}
		manifest, err := img.Digest()
		if err != nil {
			return nil, err
		}
		loaded, err := archive.Digest()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "wrote %s (%s, linux/%s: the index's manifest %s, read back with Docker media types as %s)\n", path, spec.ref, p, manifest, loaded)
	}
	annotations := labels(spec, src)
	annotations["org.opencontainers.image.created"] = src.epoch.Format(time.RFC3339)
	return mutate.Annotations(mutate.AppendManifests(empty.Index, adds...), annotations).(v1.ImageIndex), nil
}

// readable gives the files under dir mode 0644 and the directories 0755: ggcr writes a layer
// blob 0600 and index.json 0777 (less the umask), and a registry or a tar of the layout should
// see neither.
func readable(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(path, mode)
	})
}
