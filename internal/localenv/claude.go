package localenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ClaudeAgentImage is the agent image with the real Claude Code in it (hack/images -claude).
const ClaudeAgentImage = "localhost/gate-operator-test/claude-agent:v1"

// AgentCLIs are the agent runtimes the claude-agent image carries: the Claude Code binary,
// and optionally the Codex CLI binary and the Gemini CLI package directory (run by the
// machine's Node.js).
type AgentCLIs struct {
	Claude, Codex, Gemini string
}

// ImportClaudeAgent writes the claude-agent image around the agent CLIs (go run ./hack/images
// -claude, -codex, -gemini) and imports it into the node. It needs the node's busybox, which
// hack/build-node.sh extracted.
func (e *Env) ImportClaudeAgent(ctx context.Context, clis AgentCLIs) error {
	e.Step("building the claude-agent image around %s and importing it", strings.Join(slices.DeleteFunc([]string{clis.Claude, clis.Codex, clis.Gemini}, func(s string) bool { return s == "" }), ", "))
	dir, err := os.MkdirTemp(e.Dir, "claude-agent-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	args := []string{"run", "./hack/images", "-out", "", "-test-images", dir,
		"-busybox", filepath.Join(e.Root, "bin", "node", "busybox"), "-claude", clis.Claude}
	if clis.Codex != "" {
		args = append(args, "-codex", clis.Codex)
	}
	if clis.Gemini != "" {
		node, err := exec.LookPath("node")
		if err != nil {
			return err
		}
		args = append(args, "-gemini", clis.Gemini, "-node", node)
	}
	if err := e.runIn(ctx, e.Root, "go", args...); err != nil {
		return err
	}
	return e.ImportImage(ctx, filepath.Join(dir, "claude-agent.tar"))
}

// ImportImage imports a docker-archive tarball into the node's containerd, where pods find it
// (imagePullPolicy IfNotPresent or Never).
func (e *Env) ImportImage(ctx context.Context, tarball string) error {
	return e.ctr(ctx, "images", "import", "--local", tarball)
}

// KillContainer sends SIGKILL to the process of a container (its status's containerID,
// containerd://<id>) through the node's containerd, as a crash would end it.
func (e *Env) KillContainer(ctx context.Context, containerID string) error {
	id, ok := strings.CutPrefix(containerID, "containerd://")
	if !ok {
		return fmt.Errorf("container %q is not containerd's", containerID)
	}
	return e.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
}

// ctr runs the node's containerd client in the k8s.io namespace, where kubelet keeps its
// images and containers.
func (e *Env) ctr(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, filepath.Join(e.Root, "hack", "build-node.sh"), "--print").Output()
	if err != nil {
		return fmt.Errorf("hack/build-node.sh --print: %w", err)
	}
	var ctr string
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		if dir, ok := strings.CutPrefix(sc.Text(), "CONTAINERD_DIR="); ok {
			ctr = filepath.Join(dir, "ctr")
		}
	}
	if ctr == "" {
		return fmt.Errorf("hack/build-node.sh --print names no CONTAINERD_DIR: %s", out)
	}
	sock := filepath.Join(e.ClusterDir(), "node", "containerd", "containerd.sock")
	return e.runIn(ctx, e.Root, ctr, append([]string{"--address", sock, "-n", "k8s.io"}, args...)...)
}

// SandboxManifest is the pod of docs/examples/sandbox-pod.yaml as written there except its agent
// image, which is image.
func (e *Env) SandboxManifest(image string) (string, error) {
	return e.ExampleManifest("sandbox-pod.yaml", image)
}

// ExampleManifest is the pod of docs/examples/<example> as written there except its agent image,
// which is image.
func (e *Env) ExampleManifest(example, image string) (string, error) {
	b, err := os.ReadFile(filepath.Join(e.Root, "docs", "examples", example))
	if err != nil {
		return "", err
	}
	const exampleImage = "registry.example/coding-agent:1.0"
	if !bytes.Contains(b, []byte(exampleImage)) {
		return "", fmt.Errorf("docs/examples/%s no longer names the agent image %s", example, exampleImage)
	}
	return strings.Replace(string(b), exampleImage, image, 1), nil
}

// ApplyPod applies a pod manifest in namespace, waits until the pod is Ready and returns its
// name.
func (e *Env) ApplyPod(ctx context.Context, namespace, manifest string) (string, error) {
	// A release whose readiness does not wait for its webhook server (the previous release's
	// /readyz is a ping) is Available before the server listens: an apply the API server could
	// not put to the webhook is tried again, as a user's or Argo CD's would be.
	var out string
	var applyErr error
	err := Wait(ctx, 90*time.Second, func() (bool, error) {
		out, applyErr = e.Kubectl(ctx, manifest, "-n", namespace, "apply", "-f", "-", "-o", "name")
		if applyErr != nil && strings.Contains(applyErr.Error(), "failed calling webhook") {
			return false, nil
		}
		return true, applyErr
	})
	if applyErr != nil {
		return "", applyErr
	}
	if err != nil {
		return "", err
	}
	name := strings.TrimPrefix(strings.TrimSpace(out), "pod/")
	if _, err := e.Kubectl(ctx, "", "-n", namespace, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=120s"); err != nil {
		desc, _ := e.Kubectl(ctx, "", "-n", namespace, "describe", "pod", name)
		return "", fmt.Errorf("%w\n%s", err, desc)
	}
	return name, nil
}

func (e *Env) runIn(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return nil
}
