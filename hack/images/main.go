// Command images builds gate-operator's two images without a container engine or a registry:
// static binaries and a few files in one layer on an empty base. Each image is built for
// linux/amd64 and linux/arm64 with OCI media types, and its two manifests make an OCI image
// index (amd64 first); both indexes go into one OCI image layout, bin/images/oci, written
// fresh each run, whose index.json names each by its reference. It prints "<ref> <index
// digest>" for each image on stdout, its progress on stderr.
//
// Beside the layout it writes each image for -arch as a docker-archive tarball,
// bin/images/<name>.tar, which `ctr images import` (the local node) and `docker load` (an
// air-gapped install) accept. A docker-archive holds no index and records no media types:
// what reads it builds a manifest with Docker's, so it carries the config and the layer of the
// index's linux/<arch> manifest but not that manifest's digest (the progress names both).
// The test images (-test-images) are docker-archives only, for -arch.
//
// The same source, Go toolchain and CA bundle build the same digests and the same bytes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
)

func main() {
	o := options{root: ".", out: "bin/images"}
	flag.StringVar(&o.root, "root", o.root, "root of the gate-operator module")
	flag.StringVar(&o.out, "out", o.out, `directory the OCI image layout (<out>/oci) and the docker-archives are written to; "" writes only the test images`)
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "GOARCH of the docker-archives and the test images (the OS is linux); one of the index's, "+strings.Join(platforms, ", "))
	flag.StringVar(&o.caCerts, "ca-certs", defaultCACerts, "CA bundle copied into the images as "+caCertsPath)
	flag.StringVar(&o.testOut, "test-images", "", "also write the local node's test images (pause, testbed; claude-agent with -claude) into this directory")
	flag.StringVar(&o.busybox, "busybox", "bin/node/busybox", "static busybox for the testbed image (with -test-images)")
	flag.StringVar(&o.claude, "claude", "", "with -test-images, also write the claude-agent image around this Claude Code binary (test/conformance's npm install puts the pinned one in node_modules/@anthropic-ai/claude-agent-sdk-linux-x64/claude)")
	flag.StringVar(&o.codex, "codex", "", "with -claude, also put this Codex CLI binary in the claude-agent image, at /usr/local/bin/codex (test/conformance's npm install puts the pinned one in node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex)")
	flag.StringVar(&o.gemini, "gemini", "", "with -claude, also put this Gemini CLI package directory (node_modules/@google/gemini-cli) in the claude-agent image, at /usr/local/lib/gemini-cli, with -node")
	flag.StringVar(&o.node, "node", "/usr/bin/node", "Node.js for the claude-agent image's Gemini CLI (with -gemini), at /usr/local/bin/node; with its shared libraries")
	flag.StringVar(&o.bash, "bash", "/bin/bash", "bash for the claude-agent image (Claude Code's Bash tool runs bash or zsh); with its shared libraries, like claude's")
	flag.StringVar(&o.bin, "bin", "", "directory of prebuilt manager, confirmer, gate-hook (-tags nocel), gate-hook-cel, egress-wait, gate-agent and gate-client binaries (static, linux/<arch>); empty builds them")
	binFlags := map[string]*string{}
	for _, p := range platforms {
		binFlags[p] = flag.String("bin-"+p, "", "the same as -bin, for linux/"+p)
	}
	flag.Parse()
	o.bins = map[string]string{}
	for p, dir := range binFlags {
		o.bins[p] = *dir
	}
	if err := run(o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

type options struct {
	root, out, arch, caCerts string
	testOut, busybox         string // -test-images: where to write them, and the busybox they carry
	claude, bash             string // -claude: the claude-agent test image's binaries, or "" for none
	codex, gemini, node      string // -codex, -gemini: the other agent CLIs in that image, or "" for none

	bin  string            // prebuilt binaries for arch, or "" to build them
	bins map[string]string // the same by GOARCH (-bin-<arch>)
}

// binDir is the directory of the prebuilt binaries for linux/arch, or "" to build them.
func (o options) binDir(arch string) (string, error) {
	dir := o.bins[arch]
	if arch == o.arch && o.bin != "" {
		if dir != "" && dir != o.bin {
			return "", fmt.Errorf("-bin and -bin-%s name different directories", arch)
		}
		dir = o.bin
	}
	return dir, nil
}

// run writes both images to o.out (unless it is empty) and the test images to o.testOut (if
// set).
func run(o options, stdout, progress io.Writer) error {
	src, err := readSource(o.root)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(o.caCerts)
	if err != nil {
		return fmt.Errorf("reading the CA bundle for the images (Debian's ca-certificates provides %s; or pass -ca-certs): %w", defaultCACerts, err)
	}
	if o.out == "" && o.testOut == "" {
		return errors.New("nothing to write: -out and -test-images are both empty")
	}
	if o.claude != "" && o.testOut == "" {
		return errors.New("-claude writes a test image: set -test-images")
	}
	if (o.codex != "" || o.gemini != "") && o.claude == "" {
		return errors.New("-codex and -gemini go into the claude-agent image: set -claude")
	}
	if o.out != "" {
		if err := writeProductImages(o, src, ca, stdout, progress); err != nil {
			return err
		}
	}
	if o.testOut != "" {
		if err := os.MkdirAll(o.testOut, 0o755); err != nil {
			return err
		}
		t := o
		t.out = o.testOut
		return writeTestImages(t, src, ca, stdout, progress)
	}
	return nil
}

// writeProductImages builds the binaries for each of platforms (unless prebuilt) and writes
// gate-operator's two images to o.out.
func writeProductImages(o options, src *source, ca []byte, stdout, progress io.Writer) error {
	if !slices.Contains(platforms, o.arch) {
		return fmt.Errorf("-arch %s: the docker-archives are the index's linux/<arch> images, and the index has %s", o.arch, strings.Join(platforms, ", "))
	}
	bins := map[string]string{}
	for _, p := range platforms {
		dir, err := o.binDir(p)
		if err != nil {
			return err
		}
		if dir == "" {
			if dir, err = os.MkdirTemp("", "gate-operator-images-"+p+"-"); err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			fmt.Fprintf(progress, "building %v for linux/%s (CGO_ENABLED=0, -trimpath)\n", binaries, p)
			if err := buildBinaries(o.root, p, dir); err != nil {
				return err
			}
		}
		bins[p] = dir
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	return writeIndexes(imageSpecs(src), src, o.arch, ca, bins, o.out, stdout, progress)
}
