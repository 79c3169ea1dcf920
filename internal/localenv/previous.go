package localenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PreviousRelease is the tree the upgrade test starts from: the last one before cluster
// policies (2026-12-04, "Merge branch 'i29-openapi'"), which is what an installation with only
// namespace policies runs today. Its running pods carry the gate-hook of that tree.
const PreviousRelease = "af7157cc49a8737d91e84fbc815fff6c1d89beb4"

// Release is a tree of gate-operator other than this one, built into images on the node.
type Release struct {
	Commit string
	// Tree is the release's source (git archive), for its chart and its examples.
	Tree string
	// Tag is the tag of its manager and confirmer images on the node, which the chart's
	// image.tag and confirmerImage.tag must name: its own appVersion is this tree's too.
	Tag string
}

// Chart is the release's Helm chart.
func (r Release) Chart() string { return filepath.Join(r.Tree, "charts", "gate-operator") }

// Values are the helm arguments that make the release's chart run the release's images.
func (r Release) Values() []string {
	return helmSet("image.tag="+r.Tag, "confirmerImage.tag="+r.Tag)
}

// BuildRelease makes the release at commit available on the node: its source is written
// under bin/releases/<commit> (git archive; the commit must be in this clone's history), its
// images are built there once by its own hack/images, tagged <appVersion>-<commit[:7]> so that
// they stand beside this tree's, and pushed to the node's registry on every call.
func (e *Env) BuildRelease(ctx context.Context, commit string) (Release, error) {
	dir := filepath.Join(e.Root, "bin", "releases", commit)
	r := Release{Commit: commit, Tree: filepath.Join(dir, "tree")}
	images := filepath.Join(dir, "images")
	if _, err := os.Stat(images); errors.Is(err, fs.ErrNotExist) {
		e.Step("building the images of release %s (once; cached under %s)", commit[:7], dir)
		if err := e.buildRelease(ctx, commit, dir); err != nil {
			return r, fmt.Errorf("building release %s: %w", commit[:7], err)
		}
	} else if err != nil {
		return r, err
	}
	tag, err := os.ReadFile(filepath.Join(images, "tag"))
	if err != nil {
		return r, err
	}
	r.Tag = strings.TrimSpace(string(tag))
	for _, image := range []string{"gate-operator.tar", "gate-confirmer.tar"} {
		if err := e.PushImage(ctx, filepath.Join(images, image)); err != nil {
			return r, fmt.Errorf("pushing release %s's %s to the local registry: %w", commit[:7], image, err)
		}
	}
	return r, nil
}

// buildRelease writes the tree and the retagged images of commit into dir, replacing what an
// interrupted build left there; images/ appears last, so its presence means done.
func (e *Env) buildRelease(ctx context.Context, commit, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", commit)
	archive.Dir = e.Root
	extract := exec.CommandContext(ctx, "tar", "-x", "-C", tree)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	extract.Stdin = pipe
	var archiveErr strings.Builder
	archive.Stderr = &archiveErr
	if err := archive.Start(); err != nil {
		return err
	}
	if out, err := extract.CombinedOutput(); err != nil {
		_ = archive.Wait()
		return fmt.Errorf("tar -x: %w: %s", err, out)
	}
	if err := archive.Wait(); err != nil {
		return fmt.Errorf("git archive %s (is the commit in this clone's history?): %w: %s", commit, err, archiveErr.String())
	}
	epoch, err := output(ctx, e.Root, "git", "log", "-1", "--format=%ct", commit)
	if err != nil {
		return err
	}
	// The release's own image build, run in its tree. Git must not find this clone above it
	// (the images would be labelled with this tree's revision), and the images' times are the
	// commit's.
	built := filepath.Join(dir, "built")
	build := exec.CommandContext(ctx, "go", "run", "./hack/images", "-out", built, "-arch", runtime.GOARCH)
	build.Dir = tree
	build.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+dir, "SOURCE_DATE_EPOCH="+epoch)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go run ./hack/images in the release's tree: %w\n%s", err, out)
	}
	appVersion, err := output(ctx, tree, "sed", "-n", `s/^appVersion: *//p`, filepath.Join("charts", "gate-operator", "Chart.yaml"))
	if err != nil || appVersion == "" {
		return fmt.Errorf("reading the release's appVersion: %v", err)
	}
	tag := appVersion + "-" + commit[:7]
	staged := filepath.Join(dir, "images.tmp")
	if err := os.MkdirAll(staged, 0o755); err != nil {
		return err
	}
	for _, image := range []string{"gate-operator", "gate-confirmer"} {
		if err := retag(filepath.Join(built, image+".tar"), filepath.Join(staged, image+".tar"), tag); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(staged, "tag"), []byte(tag+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(built); err != nil {
		return err
	}
	return os.Rename(staged, filepath.Join(dir, "images"))
}

// retag writes the one image of the docker-archive src to dst, tagged repository:tag with the
// repository it had.
func retag(src, dst, tag string) error {
	old, img, err := archiveImage(src)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(dst, old.Context().Tag(tag), img)
}

// archiveImage is the one image of a docker-archive and the one tag it carries.
func archiveImage(path string) (name.Tag, v1.Image, error) {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		return name.Tag{}, nil, err
	}
	if len(m) != 1 || len(m[0].RepoTags) != 1 {
		return name.Tag{}, nil, fmt.Errorf("%s: want one image with one tag", path)
	}
	tag, err := name.NewTag(m[0].RepoTags[0])
	if err != nil {
		return name.Tag{}, nil, err
	}
	img, err := tarball.ImageFromPath(path, &tag)
	return tag, img, err
}

// output runs a command in dir and returns its standard output, trimmed.
func output(ctx context.Context, dir, cmd string, args ...string) (string, error) {
	c := exec.CommandContext(ctx, cmd, args...)
	c.Dir = dir
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", cmd, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
