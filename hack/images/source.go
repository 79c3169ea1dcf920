package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// binaries are the commands under cmd/ the images carry, built into binaries named the same;
// and celBinaries, cmd/<name> built a second time as <name>-cel, where <name> itself is built
// with the nocel tag: gate-hook links no CEL and hands the calls that need it to gate-hook-cel.
var (
	binaries    = []string{"manager", "confirmer", "gate-hook", "egress-wait", "gate-agent", "gate-client"}
	celBinaries = []string{"gate-hook"}
)

// source is what the images take from the module: their names and tag from the chart (the one
// place they are declared; config/manager and the manager's --confirmer-image default must name
// the same, which test/install checks), and the revision and timestamp from git.
type source struct {
	version      string // the chart's appVersion: the tag of both images and their version label
	url          string // the chart's first source: the source label
	revision     string // git HEAD, with "-dirty" when tracked files differ from it
	epoch        time.Time
	operatorRef  string // <image.repository>:<image.tag or appVersion>, as the chart renders it
	confirmerRef string // the same of confirmerImage
}

func readSource(root string) (*source, error) {
	var chart struct {
		AppVersion string   `json:"appVersion"`
		Sources    []string `json:"sources"`
	}
	var values struct {
		Image          struct{ Repository, Tag string } `json:"image"`
		ConfirmerImage struct{ Repository, Tag string } `json:"confirmerImage"`
	}
	dir := filepath.Join(root, "charts", "gate-operator")
	if err := readYAML(filepath.Join(dir, "Chart.yaml"), &chart); err != nil {
		return nil, err
	}
	if err := readYAML(filepath.Join(dir, "values.yaml"), &values); err != nil {
		return nil, err
	}
	if chart.AppVersion == "" || len(chart.Sources) == 0 {
		return nil, fmt.Errorf("%s: appVersion and sources are required", filepath.Join(dir, "Chart.yaml"))
	}
	if values.Image.Repository == "" || values.ConfirmerImage.Repository == "" {
		return nil, fmt.Errorf("%s: image.repository and confirmerImage.repository are required", filepath.Join(dir, "values.yaml"))
	}
	ref := func(repo, tag string) string {
		if tag == "" {
			tag = chart.AppVersion
		}
		return repo + ":" + tag
	}
	epoch, err := sourceDateEpoch(root)
	if err != nil {
		return nil, err
	}
	return &source{
		version:      chart.AppVersion,
		url:          chart.Sources[0],
		revision:     revision(root),
		epoch:        epoch,
		operatorRef:  ref(values.Image.Repository, values.Image.Tag),
		confirmerRef: ref(values.ConfirmerImage.Repository, values.ConfirmerImage.Tag),
	}, nil
}

func readYAML(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// sourceDateEpoch is the time of every file and of the image configs: SOURCE_DATE_EPOCH
// (reproducible-builds.org) if set, else the last commit's time, else the Unix epoch.
func sourceDateEpoch(root string) (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970", s)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	if out, err := git(root, "log", "-1", "--format=%ct"); err == nil {
		if n, err := strconv.ParseInt(out, 10, 64); err == nil {
			return time.Unix(n, 0).UTC(), nil
		}
	}
	return time.Unix(0, 0).UTC(), nil
}

// revision is HEAD's commit, marked "-dirty" as `git describe --dirty` would, or "unknown"
// outside a git checkout.
func revision(root string) string {
	head, err := git(root, "rev-parse", "HEAD")
	if err != nil {
		return "unknown"
	}
	cmd := exec.Command("git", "diff", "--quiet", "HEAD", "--")
	cmd.Dir = root
	var exit *exec.ExitError
	if err := cmd.Run(); errors.As(err, &exit) && exit.ExitCode() == 1 {
		return head + "-dirty"
	}
	return head
}

func git(root string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// buildBinaries builds the commands static and reproducibly into dir: no cgo, no paths of this
// machine, no build ID, no VCS stamp (the revision is a label of the image), no symbol table.
// GOFLAGS is cleared so the environment cannot add to the flags. The commands of celBinaries
// are built with the nocel tag, and again without it as <name>-cel.
func buildBinaries(root, arch, dir string) error {
	flags := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid="}
	var plain []string
	for _, b := range binaries {
		if !slices.Contains(celBinaries, b) {
			plain = append(plain, "./cmd/"+b)
		}
	}
	builds := [][]string{append(append(slices.Clone(flags), "-o", dir+string(filepath.Separator)), plain...)}
	for _, b := range celBinaries {
		builds = append(builds,
			append(slices.Clone(flags), "-tags", "nocel", "-o", filepath.Join(dir, b), "./cmd/"+b),
			append(slices.Clone(flags), "-o", filepath.Join(dir, b+"-cel"), "./cmd/"+b))
	}
	for _, args := range builds {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
		}
	}
	return nil
}
