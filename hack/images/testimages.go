package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The local node's test images: never released, tagged under localhost/ so that nothing could
// pull them from a registry. The pause image is containerd's pinned sandbox image; the testbed
// image runs the fakes of the demo and the e2e tests (DNS, the Managed Agents API, the Messages
// API stand-in, TCP probes) and stands in for an agent image: a static busybox from Debian gives
// it the POSIX shell and the few tools the PreToolUse hook wrapper needs (/bin/sh, /usr/bin/env,
// sleep). With -claude, the claude-agent image is the real Claude Code for the conformance
// suite's sandbox pod, and with -codex and -gemini the real Codex CLI and Gemini CLI beside it:
// one agent image for the three runtimes, so the suite builds and imports one.
const (
	PauseRef   = "localhost/gate-operator-test/pause:v1"
	TestbedRef = "localhost/gate-operator-test/testbed:v1"
	// ClaudeAgentRef is the agent image of the conformance suite's sandbox pod (-claude).
	ClaudeAgentRef = "localhost/gate-operator-test/claude-agent:v1"
)

// busyboxApplets are linked into the testbed image's /bin.
var busyboxApplets = []string{"sh", "env", "sleep", "cat", "ls", "echo", "rm", "mkdir", "touch", "test", "id", "printf", "kill", "ps", "grep", "wc", "head", "true", "false", "nc", "wget", "nslookup"}

// claudeApplets are the claude-agent image's further tools: what Claude Code's Bash tool and
// its shell snapshot call besides bash's builtins.
var claudeApplets = []string{"basename", "chmod", "cp", "cut", "dirname", "find", "mktemp", "mv", "readlink", "realpath", "sed", "sort", "stat", "tail", "tr", "uname", "which", "xargs"}

// busyboxFiles are /bin/busybox, the applets linked to it in /bin, /usr/bin/env, and /tmp.
func busyboxFiles(busybox []byte, applets ...[]string) []file {
	files := []file{
		{path: "bin/", mode: 0o755},
		{path: "bin/busybox", mode: 0o755, data: busybox},
		{path: "tmp/", mode: 0o1777},
		{path: "usr/", mode: 0o755},
		{path: "usr/bin/", mode: 0o755},
	}
	for _, list := range applets {
		for _, a := range list {
			files = append(files, file{path: "bin/" + a, mode: 0o777, link: "busybox"})
		}
	}
	return append(files, file{path: "usr/bin/env", mode: 0o777, link: "/bin/busybox"})
}

func testImageSpecs(busybox []byte) []imageSpec {
	extra := busyboxFiles(busybox, busyboxApplets)
	return []imageSpec{
		{name: "pause", ref: PauseRef, binaries: []string{"testbed"}, entrypoint: []string{"/testbed", "pause"}, comment: "testbed pause: the pod sandbox"},
		{name: "testbed", ref: TestbedRef, binaries: []string{"testbed"}, cmd: []string{"pause"}, extra: extra, comment: "testbed and a static busybox from Debian"},
	}
}

// agentUID is the claude-agent image's user, the one docs/examples/sandbox-pod.yaml runs as.
const agentUID = 1000

// claudeAgentSpec is Claude Code as it runs in a sandbox pod: the claude binary at
// /usr/local/bin/claude, Debian's bash at /bin/bash (Claude Code's Bash tool runs bash or zsh,
// nothing else), the shared libraries and the dynamic loader both link, busybox for /bin/sh
// (the hook wrapper) and the tools, testbed for its pause (the entrypoint) and probe, a CA
// bundle, and the user agent (uid 1000) with its home /home/agent and /workspace. The pod mounts
// writable volumes over those two and /tmp; the rest can be read-only.
func claudeAgentSpec(ca, busybox, claude, bash []byte, libs, others []file) imageSpec {
	root := rootFiles(ca)
	for i, f := range root {
		switch f.path {
		case "etc/passwd":
			root[i].data = append(slices.Clone(f.data), fmt.Sprintf("agent:x:%d:%d:agent:/home/agent:/bin/bash\n", agentUID, agentUID)...)
		case "etc/group":
			root[i].data = append(slices.Clone(f.data), fmt.Sprintf("agent:x:%d:\n", agentUID)...)
		}
	}
	root = append(root, file{path: "home/agent/", mode: 0o755, uid: agentUID, gid: agentUID})
	extra := append(busyboxFiles(busybox, busyboxApplets, claudeApplets),
		file{path: "bin/bash", mode: 0o755, data: bash},
		file{path: "usr/local/", mode: 0o755},
		file{path: "usr/local/bin/", mode: 0o755},
		file{path: "usr/local/bin/claude", mode: 0o755, data: claude},
		file{path: "workspace/", mode: 0o755, uid: agentUID, gid: agentUID},
	)
	extra = append(extra, others...)
	return imageSpec{
		name: "claude-agent", ref: ClaudeAgentRef, binaries: []string{"testbed"}, entrypoint: []string{"/testbed", "pause"},
		root: root, user: agentUID, extra: append(extra, libs...),
		comment: "Claude Code, Debian's bash and their shared libraries, a static busybox, testbed",
	}
}

// claudeAgent reads the claude-agent image's programs and resolves their shared libraries.
func claudeAgent(o options, ca, busybox []byte, progress io.Writer) (imageSpec, error) {
	claude, err := os.ReadFile(o.claude)
	if err != nil {
		return imageSpec{}, fmt.Errorf("-claude: %w (test/conformance installs the pinned binary with npm ci)", err)
	}
	bash, err := os.ReadFile(o.bash)
	if err != nil {
		return imageSpec{}, fmt.Errorf("-bash: %w (Debian's bash)", err)
	}
	linked := []string{o.claude, o.bash}
	others, err := otherAgents(o)
	if err != nil {
		return imageSpec{}, err
	}
	if o.gemini != "" {
		linked = append(linked, o.node)
	}
	libs, err := sharedLibs(o.arch, linked...)
	if err != nil {
		return imageSpec{}, err
	}
	for _, l := range libs {
		if l.data != nil {
			fmt.Fprintf(progress, "claude-agent: /%s\n", l.path)
		}
	}
	return claudeAgentSpec(ca, busybox, claude, bash, libs, others), nil
}

// otherAgents are the claude-agent image's files of Codex CLI (-codex, a static binary) and
// Gemini CLI (-gemini: its package directory, run by -node).
func otherAgents(o options) ([]file, error) {
	var files []file
	if o.codex != "" {
		codex, err := os.ReadFile(o.codex)
		if err != nil {
			return nil, fmt.Errorf("-codex: %w (test/conformance installs the pinned binary with npm ci)", err)
		}
		// As the npm package lays them out: Codex looks for its bundled bubblewrap in
		// codex-resources beside the directory of its binary.
		files = append(files, file{path: "usr/local/lib/", mode: 0o755}, file{path: "usr/local/lib/codex/", mode: 0o755},
			file{path: "usr/local/lib/codex/bin/", mode: 0o755}, file{path: "usr/local/lib/codex/bin/codex", mode: 0o755, data: codex},
			file{path: "usr/local/bin/codex", mode: 0o777, link: "/usr/local/lib/codex/bin/codex"})
		if bwrap, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(o.codex)), "codex-resources", "bwrap")); err == nil {
			files = append(files, file{path: "usr/local/lib/codex/codex-resources/", mode: 0o755},
				file{path: "usr/local/lib/codex/codex-resources/bwrap", mode: 0o755, data: bwrap})
		}
	}
	if o.gemini == "" {
		return files, nil
	}
	node, err := os.ReadFile(o.node)
	if err != nil {
		return nil, fmt.Errorf("-node: %w", err)
	}
	if o.codex == "" {
		files = append(files, file{path: "usr/local/lib/", mode: 0o755})
	}
	files = append(files, file{path: "usr/local/bin/node", mode: 0o755, data: node}, file{path: "usr/local/lib/gemini-cli/", mode: 0o755})
	err = filepath.WalkDir(o.gemini, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(o.gemini, p)
		if err != nil || rel == "." {
			return err
		}
		// The package as npm publishes it (package.json "files"), without what npm installed
		// beside it.
		if top := strings.Split(rel, string(filepath.Separator))[0]; top != "bundle" && top != "package.json" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		name := "usr/local/lib/gemini-cli/" + filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			files = append(files, file{path: name + "/", mode: 0o755})
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files = append(files, file{path: name, mode: 0o644, data: data})
		}
		return nil
	})
	return files, err
}

// writeTestImages builds hack/testbed and writes the test images into out, and the
// claude-agent image when o.claude names a Claude Code binary.
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
	specs := testImageSpecs(busybox)
	if o.claude != "" {
		spec, err := claudeAgent(o, ca, busybox, progress)
		if err != nil {
			return err
		}
		specs = append(specs, spec)
	}
	return writeArchives(specs, src, o.arch, ca, dir, o.out, stdout, progress)
}

// writeArchives writes each image for arch as <out>/<name>.tar, a docker-archive with its
// binaries from binDir, and prints "<ref> <digest>" for each, the digest its manifest is read
// back with.
func writeArchives(specs []imageSpec, src *source, arch string, ca []byte, binDir, out string, stdout, progress io.Writer) error {
	for _, spec := range specs {
		path := filepath.Join(out, spec.name+".tar")
		fmt.Fprintf(progress, "writing %s (%s)\n", path, spec.ref)
		digest, err := writeArchiveImage(spec, src, arch, ca, binDir, path)
		if err != nil {
			return fmt.Errorf("image %s: %w", spec.name, err)
		}
		fmt.Fprintf(stdout, "%s %s\n", spec.ref, digest)
	}
	return nil
}

// writeArchiveImage writes spec's image for arch as a docker-archive at path and returns the
// digest its manifest is read back with.
func writeArchiveImage(spec imageSpec, src *source, arch string, ca []byte, binDir, path string) (string, error) {
	blob, err := layerBlob(spec, src, ca, binDir)
	if err != nil {
		return "", err
	}
	img, err := newImage(spec, src, arch, blob, dockerTypes)
	if err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	return digest.String(), writeArchive(spec.ref, img, path)
}
