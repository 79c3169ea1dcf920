package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sync/errgroup"
)

const root = "../.."

// TestImages builds the binaries once, then both images twice from them with the command as
// `make images` runs it, and checks what a cluster and a release pipeline depend on: the
// digests repeat, the tarballs load with the digest printed (what `crane push` pushes), the
// names are the ones the manifests run, and the files, owners and config are as documented.
// (The command runs as its own process so that compression does not run under -race.)
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

	bin, tool := t.TempDir(), filepath.Join(t.TempDir(), "images")
	var g errgroup.Group
	g.Go(func() error { return buildBinaries(root, runtime.GOARCH, bin) })
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
	outs := [2]string{t.TempDir(), t.TempDir()}
	var printed [2]bytes.Buffer
	for i := range outs {
		g.Go(func() error {
			cmd := exec.Command(tool, "-root", root, "-out", outs[i], "-bin", bin, "-ca-certs", ca)
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

	digests := map[string]string{} // ref -> digest, as printed
	for _, line := range strings.Split(strings.TrimSpace(printed[0].String()), "\n") {
		ref, digest, _ := strings.Cut(line, " ")
		digests[ref] = digest
	}
	t.Run("reproducible", func(t *testing.T) {
		if printed[0].String() != printed[1].String() {
			t.Errorf("two builds printed\n%s\nand\n%s", &printed[0], &printed[1])
		}
		for _, spec := range imageSpecs(src) {
			a, b := readFile(t, filepath.Join(outs[0], spec.name+".tar")), readFile(t, filepath.Join(outs[1], spec.name+".tar"))
			if !bytes.Equal(a, b) {
				t.Errorf("%s.tar differs between two builds", spec.name)
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

	for _, tc := range []struct {
		spec     imageSpec
		binaries []string
	}{
		{imageSpecs(src)[0], []string{"manager"}},
		{imageSpecs(src)[1], []string{"confirmer", "gate-hook", "gate-hook-cel", "egress-wait", "gate-agent", "gate-client"}},
	} {
		t.Run(tc.spec.name, func(t *testing.T) {
			path := filepath.Join(outs[0], tc.spec.name+".tar")
			tag, err := name.NewTag(tc.spec.ref)
			if err != nil {
				t.Fatal(err)
			}
			img, err := tarball.ImageFromPath(path, &tag)
			if err != nil {
				t.Fatal(err)
			}
			if d, err := img.Digest(); err != nil || d.String() != digests[tc.spec.ref] {
				t.Errorf("the tarball loads as %v (%v), printed %s", d, err, digests[tc.spec.ref])
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			checkConfig(t, cf, src, tc.spec.name, "/"+tc.binaries[0])
			checkLayer(t, img, src.epoch, ca, bin, tc.binaries)
		})
	}
}

func checkConfig(t *testing.T, cf *v1.ConfigFile, src *source, title, entrypoint string) {
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
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Equal(src.epoch) {
		t.Errorf("config is %s/%s created %v; want linux/%s created %v", cf.OS, cf.Architecture, cf.Created, runtime.GOARCH, src.epoch)
	}
}

// checkLayer compares the one layer's entries, in order, with every header field that matters,
// and its files with their sources; the binaries must be static.
func checkLayer(t *testing.T, img v1.Image, epoch time.Time, ca, bin string, binaries []string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
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
