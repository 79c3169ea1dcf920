package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"
)

const root = "../.."

// TestImages builds the binaries once for each of platforms, then both images twice from them
// with the command as `make images` runs it, and checks what a cluster and a release pipeline
// depend on: the index digests and every byte written repeat, each index holds its image for
// each platform with OCI media types and is named by its reference, the docker-archives carry
// the config and layer of the index's image for this machine, the names are the ones the
// manifests run, and the files, owners, architectures and config are as documented. (The command
// runs as its own process so that compression does not run under -race.)
func TestImages(t *testing.T) {
	src, err := readSource(root)
	if err != nil {
		t.Fatal(err)
	}
	// Any bundle will do: the test compares bytes, and needs no Debian machine.
	ca := filepath.Join(t.TempDir(), "ca-certificates.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("no CA bundle", func(t *testing.T) {
		err := run(options{root: root, out: t.TempDir(), caCerts: filepath.Join(t.TempDir(), "absent.crt")}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "ca-certificates") {
			t.Errorf("run without a CA bundle: %v; want an error naming ca-certificates", err)
		}
	})
	t.Run("archive outside the index", func(t *testing.T) {
		err := run(options{root: root, out: t.TempDir(), arch: "riscv64", caCerts: ca}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "-arch riscv64") {
			t.Errorf("run -arch riscv64: %v; want an error naming -arch", err)
		}
	})

	bins, tool := map[string]string{}, filepath.Join(t.TempDir(), "images")
	var g errgroup.Group
	for _, p := range platforms {
		dir := t.TempDir()
		bins[p] = dir
		g.Go(func() error { return buildBinaries(root, p, dir) })
	}
	g.Go(func() error {
		out, err := exec.Command("go", "build", "-o", tool, ".").CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build ./hack/images: %v\n%s", err, out)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	// -bin for this machine's binaries, as hack/lib/node.sh passes them; -bin-<arch> for the others.
	args := []string{"-root", root, "-ca-certs", ca, "-bin", bins[runtime.GOARCH]}
	for _, p := range platforms {
		if p != runtime.GOARCH {
			args = append(args, "-bin-"+p, bins[p])
		}
	}
	outs := [2]string{t.TempDir(), t.TempDir()}
	var printed [2]bytes.Buffer
	for i := range outs {
		g.Go(func() error {
			cmd := exec.Command(tool, append(slices.Clone(args), "-out", outs[i])...)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &printed[i], &stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, &stderr)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	digests := map[string]string{} // ref -> index digest, as printed
	for _, line := range strings.Split(strings.TrimSpace(printed[0].String()), "\n") {
		ref, digest, _ := strings.Cut(line, " ")
		digests[ref] = digest
	}
	t.Run("reproducible", func(t *testing.T) {
		if printed[0].String() != printed[1].String() {
			t.Errorf("two builds printed\n%s\nand\n%s", &printed[0], &printed[1])
		}
		a, b := tree(t, outs[0]), tree(t, outs[1])
		if len(a) != len(b) {
			t.Errorf("two builds wrote %d and %d files", len(a), len(b))
		}
		for path, data := range a {
			if !bytes.Equal(data, b[path]) {
				t.Errorf("%s differs between two builds", path)
			}
		}
	})

	t.Run("names agree with the manifests", func(t *testing.T) {
		if src.operatorRef != defaultImageOf(t) || src.confirmerRef != defaultConfirmerImageOf(t) {
			t.Errorf("the images built are %s and %s; config/manager and cmd/manager name %s and %s",
				src.operatorRef, src.confirmerRef, defaultImageOf(t), defaultConfirmerImageOf(t))
		}
		if !strings.HasSuffix(src.operatorRef, ":"+src.version) || len(digests) != 2 || digests[src.operatorRef] == "" || digests[src.confirmerRef] == "" {
			t.Errorf("want both images tagged with appVersion %s and printed, got %v", src.version, digests)
		}
	})

	lp, err := layout.FromPath(filepath.Join(outs[0], layoutDir))
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	named, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	specs := imageSpecs(src)
	if len(named.Manifests) != len(specs) {
		t.Fatalf("the layout's index.json lists %d indexes, want %d", len(named.Manifests), len(specs))
	}
	for i, tc := range []struct {
		spec     imageSpec
		binaries []string
	}{
		{specs[0], []string{"manager"}},
		{specs[1], []string{"confirmer", "gate-hook", "gate-hook-cel", "egress-wait", "gate-agent", "gate-client"}},
	} {
		t.Run(tc.spec.name, func(t *testing.T) {
			desc := named.Manifests[i]
			if desc.MediaType != types.OCIImageIndex || desc.Digest.String() != digests[tc.spec.ref] ||
				desc.Annotations["org.opencontainers.image.ref.name"] != tc.spec.ref || desc.Annotations["io.containerd.image.name"] != tc.spec.ref {
				t.Errorf("index.json lists %s %s named %v; want the printed index %s named %s", desc.MediaType, desc.Digest, desc.Annotations, digests[tc.spec.ref], tc.spec.ref)
			}
			idx, err := top.ImageIndex(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			want := labels(tc.spec, src)
			want["org.opencontainers.image.created"] = src.epoch.Format(time.RFC3339)
			if im.MediaType != types.OCIImageIndex || fmt.Sprint(im.Annotations) != fmt.Sprint(want) {
				t.Errorf("index %s annotated %v; want %s annotated %v", im.MediaType, im.Annotations, types.OCIImageIndex, want)
			}
			if len(im.Manifests) != len(platforms) {
				t.Fatalf("the index lists %d manifests, want one for each of %v", len(im.Manifests), platforms)
			}
			for j, p := range platforms {
				m := im.Manifests[j]
				if m.MediaType != types.OCIManifestSchema1 || m.Platform == nil || m.Platform.String() != "linux/"+p {
					t.Errorf("manifest %d is %s for %v; want %s for linux/%s", j, m.MediaType, m.Platform, types.OCIManifestSchema1, p)
				}
				img, err := idx.Image(m.Digest)
				if err != nil {
					t.Fatal(err)
				}
				checkImage(t, img, src, tc.spec.name, tc.binaries, p, ca, bins[p])
				if p == runtime.GOARCH {
					checkArchive(t, filepath.Join(outs[0], tc.spec.name+".tar"), tc.spec.ref, img)
				}
			}
		})
	}
}

// checkImage checks one platform's image of an index: OCI media types, its config, its layer.
func checkImage(t *testing.T, img v1.Image, src *source, title string, binaries []string, arch, ca, bin string) {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("linux/%s: config %s, layers %v; want %s and one %s", arch, m.Config.MediaType, m.Layers, types.OCIConfigJSON, types.OCILayer)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	checkConfig(t, cf, src, title, "/"+binaries[0], arch)
	checkLayer(t, img, src.epoch, ca, bin, binaries, arch)
}

// checkArchive checks that the docker-archive at path is named ref and carries img's config and
// layer.
func checkArchive(t *testing.T, path, ref string, img v1.Image) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	archived, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	config := func(img v1.Image) string {
		h, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	layer := func(img v1.Image) string {
		h, err := oneLayer(t, img).Digest()
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	if config(archived) != config(img) || layer(archived) != layer(img) {
		t.Errorf("%s holds config %s and layer %s; the index's linux/%s image %s and %s", path, config(archived), layer(archived), runtime.GOARCH, config(img), layer(img))
	}
}

// oneLayer is img's layer, the only one it may have.
func oneLayer(t *testing.T, img v1.Image) v1.Layer {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	return layers[0]
}

// tree reads every file under dir, by its path relative to dir.
func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files[rel], err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func checkConfig(t *testing.T, cf *v1.ConfigFile, src *source, title, entrypoint, arch string) {
	t.Helper()
	c := cf.Config
	if c.User != "65532:65532" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != entrypoint || len(c.Cmd) != 0 || c.WorkingDir != "/" || len(c.Env) != 0 {
		t.Errorf("config runs %q %v %v in %q with %v; want 65532:65532 [%s] in /", c.User, c.Entrypoint, c.Cmd, c.WorkingDir, c.Env, entrypoint)
	}
	want := map[string]string{
		"org.opencontainers.image.title":    title,
		"org.opencontainers.image.source":   "https://github.com/intutic/gate-operator",
		"org.opencontainers.image.version":  src.version,
		"org.opencontainers.image.revision": src.revision,
	}
	if fmt.Sprint(c.Labels) != fmt.Sprint(want) {
		t.Errorf("labels = %v, want %v", c.Labels, want)
	}
	if cf.OS != "linux" || cf.Architecture != arch || !cf.Created.Equal(src.epoch) {
		t.Errorf("config is %s/%s created %v; want linux/%s created %v", cf.OS, cf.Architecture, cf.Created, arch, src.epoch)
	}
}

// checkLayer compares the one layer's entries, in order, with every header field that matters,
// and its files with their sources; the binaries must be static, for arch.
func checkLayer(t *testing.T, img v1.Image, epoch time.Time, ca, bin string, binaries []string, arch string) {
	t.Helper()
	rc, err := oneLayer(t, img).Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	want := []string{
		"etc/ d 0755 0:0",
		"etc/group - 0644 0:0",
		"etc/passwd - 0644 0:0",
		"etc/ssl/ d 0755 0:0",
		"etc/ssl/certs/ d 0755 0:0",
		"etc/ssl/certs/ca-certificates.crt - 0644 0:0",
		"home/ d 0755 0:0",
		"home/nonroot/ d 0700 65532:65532",
	}
	wantData := map[string][]byte{
		"etc/ssl/certs/ca-certificates.crt": readFile(t, ca),
	}
	for _, b := range binaries {
		want = append(want, b+" - 0755 0:0")
		wantData[b] = readFile(t, filepath.Join(bin, b))
	}
	var got []string
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		kind := map[byte]string{tar.TypeDir: "d", tar.TypeReg: "-"}[h.Typeflag]
		got = append(got, fmt.Sprintf("%s %s %04o %d:%d", h.Name, kind, h.Mode, h.Uid, h.Gid))
		if !h.ModTime.Equal(epoch) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, epoch)
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("layer holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for path, data := range wantData {
		if !bytes.Equal(files[path], data) {
			t.Errorf("%s differs from its source", path)
		}
	}
	if !regexp.MustCompile(`(?m)^nonroot:x:65532:65532:`).Match(files["etc/passwd"]) || !regexp.MustCompile(`(?m)^nonroot:x:65532:`).Match(files["etc/group"]) {
		t.Errorf("passwd and group do not name nonroot 65532:\n%s%s", files["etc/passwd"], files["etc/group"])
	}
	for _, b := range binaries {
		f, err := elf.NewFile(bytes.NewReader(files[b]))
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if f.Machine != debianTriples[arch].machine {
			t.Errorf("%s is for %s, want %s (linux/%s)", b, f.Machine, debianTriples[arch].machine, arch)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked", b)
			}
		}
	}
	// gate-hook is built without CEL (its function names would name the module), gate-hook-cel with.
	if data, ok := files["gate-hook"]; ok && (bytes.Contains(data, []byte("cel-go")) || !bytes.Contains(files["gate-hook-cel"], []byte("cel.dev/cel-go"))) {
		t.Error("the image's gate-hook links cel-go, or its gate-hook-cel does not")
	}
}

var (
	managerImage          = regexp.MustCompile(`(?m)^\s+image: (\S+)$`)
	managerConfirmerImage = regexp.MustCompile(`--confirmer-image=(\S+)`)
	flagConfirmerImage    = regexp.MustCompile(`"confirmer-image", "([^"]+)"`)
)

// defaultImageOf is the image config/manager runs.
func defaultImageOf(t *testing.T) string {
	return submatch(t, managerImage, filepath.Join(root, "config", "manager", "manager.yaml"))
}

// defaultConfirmerImageOf is the --confirmer-image of config/manager, which must also be the
// manager's own default.
func defaultConfirmerImageOf(t *testing.T) string {
	kustomize := submatch(t, managerConfirmerImage, filepath.Join(root, "config", "manager", "manager.yaml"))
	if flag := submatch(t, flagConfirmerImage, filepath.Join(root, "cmd", "manager", "main.go")); flag != kustomize {
		t.Errorf("cmd/manager defaults --confirmer-image to %s, config/manager passes %s", flag, kustomize)
	}
	return kustomize
}

func submatch(t *testing.T, re *regexp.Regexp, path string) string {
	t.Helper()
	m := re.FindSubmatch(readFile(t, path))
	if m == nil {
		t.Fatalf("%s: no match for %s", path, re)
	}
	return string(m[1])
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
