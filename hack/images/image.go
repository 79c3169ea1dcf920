package main

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// caCertsPath is where Go's crypto/x509 looks first on Linux, in the images, and where
	// Debian's ca-certificates puts its bundle on the build machine.
	caCertsPath    = "/etc/ssl/certs/ca-certificates.crt"
	defaultCACerts = caCertsPath
	// nonroot is the user and group the images run as (distroless's nonroot).
	nonroot = 65532
)

// imageSpec is one image: its binaries sit at /<name>, the first is the entrypoint (the
// Deployments set only args; the sandbox init container runs /gate-hook as its command),
// unless entrypoint says otherwise.
type imageSpec struct {
	name, ref  string
	binaries   []string
	entrypoint []string // default: /<binaries[0]>
	cmd        []string
	extra      []file // more files, after the binaries
	comment    string // the layer's history comment
	root       []file // replaces rootFiles(ca), for an image with other users
	user       int    // the image's user and group; default nonroot
}

func imageSpecs(src *source) []imageSpec {
	return []imageSpec{
		{name: "gate-operator", ref: src.operatorRef, binaries: []string{"manager"}},
		{name: "gate-confirmer", ref: src.confirmerRef, binaries: []string{"confirmer", "gate-hook", "gate-hook-cel", "egress-wait", "gate-agent", "gate-client"}},
	}
}

// file is one entry of the layer, with every header field that could vary set explicitly.
type file struct {
	path     string // relative to /, directories ending in "/"
	mode     int64
	uid, gid int
	data     []byte
	link     string // the target of a symbolic link; data is empty
}

// rootFiles are the files every image carries besides its binaries: a passwd and group naming
// root and nonroot, nonroot's home, and the CA bundle for outbound TLS (the Anthropic API).
func rootFiles(ca []byte) []file {
	return []file{
		{path: "etc/", mode: 0o755},
		{path: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{path: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{path: "etc/ssl/", mode: 0o755},
		{path: "etc/ssl/certs/", mode: 0o755},
		{path: caCertsPath[1:], mode: 0o644, data: ca},
		{path: "home/", mode: 0o755},
		{path: "home/nonroot/", mode: 0o700, uid: nonroot, gid: nonroot},
	}
}

// mediaTypes are an image's manifest, config and layer media types.
type mediaTypes struct{ manifest, config, layer types.MediaType }

var (
	// ociTypes are those of the index's images: an OCI index lists OCI manifests.
	ociTypes = mediaTypes{types.OCIManifestSchema1, types.OCIConfigJSON, types.OCILayer}
	// dockerTypes are those a docker-archive is read back with: it records none, and `ctr
	// images import`, `docker load` and `crane push` give its manifest Docker's.
	dockerTypes = mediaTypes{types.DockerManifestSchema2, types.DockerConfigJSON, types.DockerLayer}
)

// layerBlob is spec's one layer, with its binaries from binDir: built once per architecture and
// given either media types, so an image's docker-archive carries the layer of its index.
func layerBlob(spec imageSpec, src *source, ca []byte, binDir string) ([]byte, error) {
	files := spec.root
	if files == nil {
		files = rootFiles(ca)
	}
	for _, b := range spec.binaries {
		data, err := os.ReadFile(filepath.Join(binDir, b))
		if err != nil {
			return nil, err
		}
		files = append(files, file{path: b, mode: 0o755, data: data})
	}
	return gzipTar(append(files, spec.extra...), src.epoch)
}

// newImage is spec's image for linux/arch: the layer blob on an empty base, with the media
// types mt.
func newImage(spec imageSpec, src *source, arch string, blob []byte, mt mediaTypes) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}, tarball.WithMediaType(mt.layer))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: src.epoch}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, mt.manifest), mt.config)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: created, CreatedBy: "go run ./hack/images", Comment: cmp.Or(spec.comment, "static binaries, passwd, group, CA certificates")},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	entrypoint := spec.entrypoint
	if entrypoint == nil {
		entrypoint = []string{"/" + spec.binaries[0]}
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, created
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", cmp.Or(spec.user, nonroot), cmp.Or(spec.user, nonroot)),
		Entrypoint: entrypoint,
		Cmd:        spec.cmd,
		WorkingDir: "/",
		Labels:     labels(spec, src),
	}
	return mutate.ConfigFile(img, cf)
}

// labels are an image config's labels, and with the creation time its index's annotations.
func labels(spec imageSpec, src *source) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    spec.name,
		"org.opencontainers.image.source":   src.url,
		"org.opencontainers.image.version":  src.version,
		"org.opencontainers.image.revision": src.revision,
	}
}

// writeArchive writes img as a docker-archive tarball named ref at path (atomically).
func writeArchive(ref string, img v1.Image, path string) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tarball.Write(tag, img, tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// gzipTar is the layer: files in the order given, every time at mtime; gzip's header carries
// no name or time, so the blob depends on the files alone.
func gzipTar(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, f := range files {
		h := &tar.Header{
			Name:     f.path,
			Mode:     f.mode,
			Uid:      f.uid,
			Gid:      f.gid,
			ModTime:  mtime,
			Typeflag: tar.TypeReg,
			Size:     int64(len(f.data)),
			Format:   tar.FormatUSTAR,
		}
		switch {
		case f.path[len(f.path)-1] == '/':
			h.Typeflag, h.Size = tar.TypeDir, 0
		case f.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, f.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
