package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// The local node's test images: never released, tagged under localhost/ so that nothing could
// pull them from a registry. The pause image is containerd's pinned sandbox image; the testbed
// image runs the fakes of the demo and the e2e tests (DNS, the Managed Agents API, TCP probes)
// and stands in for an agent image: a static busybox from Debian gives it the POSIX shell and
// the few tools the PreToolUse hook wrapper needs (/bin/sh, /usr/bin/env, sleep).
const (
	PauseRef   = "localhost/gate-operator-test/pause:v1"
	TestbedRef = "localhost/gate-operator-test/testbed:v1"
)

// busyboxApplets are linked into the testbed image's /bin.
var busyboxApplets = []string{"sh", "env", "sleep", "cat", "ls", "echo", "rm", "mkdir", "touch", "test", "id", "printf", "kill", "ps", "grep", "wc", "head", "true", "false", "nc", "wget", "nslookup"}

func testImageSpecs(busybox []byte) []imageSpec {
	extra := []file{
		{path: "bin/", mode: 0o755},
		{path: "bin/busybox", mode: 0o755, data: busybox},
		{path: "tmp/", mode: 0o1777},
		{path: "usr/", mode: 0o755},
		{path: "usr/bin/", mode: 0o755},
	}
	for _, a := range busyboxApplets {
		extra = append(extra, file{path: "bin/" + a, mode: 0o777, link: "busybox"})
	}
	extra = append(extra, file{path: "usr/bin/env", mode: 0o777, link: "/bin/busybox"})
	return []imageSpec{
		{name: "pause", ref: PauseRef, binaries: []string{"testbed"}, entrypoint: []string{"/testbed", "pause"}, comment: "testbed pause: the pod sandbox"},
		{name: "testbed", ref: TestbedRef, binaries: []string{"testbed"}, cmd: []string{"pause"}, extra: extra, comment: "testbed and a static busybox from Debian"},
	}
}

// writeTestImages builds hack/testbed and writes the test images into out.
func writeTestImages(o options, src *source, ca []byte, stdout, progress io.Writer) error {
	busybox, err := os.ReadFile(o.busybox)
	if err != nil {
		return fmt.Errorf("reading the static busybox (hack/build-node.sh extracts it from Debian's busybox-static): %w", err)
	}
	dir, err := os.MkdirTemp("", "gate-operator-test-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", filepath.Join(dir, "testbed"), "./hack/testbed")
	cmd.Dir = o.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.arch, "GOFLAGS=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./hack/testbed: %w\n%s", err, out.String())
	}
	for _, spec := range testImageSpecs(busybox) {
		path := filepath.Join(o.out, spec.name+".tar")
		fmt.Fprintf(progress, "writing %s (%s)\n", path, spec.ref)
		digest, err := writeImage(spec, src, o.arch, ca, dir, path)
		if err != nil {
			return fmt.Errorf("image %s: %w", spec.name, err)
		}
		fmt.Fprintf(stdout, "%s %s\n", spec.ref, digest)
	}
	return nil
}
