package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// sbomMediaType is the SBOM's media type, as an OCI referrer's artifactType and layer.
const sbomMediaType = "application/vnd.cyclonedx+json"

// errNoBuildInfo marks a file that is not a Go binary: an error among OS/ARCH=BINARY, skipped in
// an image.
var errNoBuildInfo = errors.New("no Go build information")

// toolName names this command in the SBOM's metadata.tools.
const toolName = "github.com/intutic/gate-operator/hack/release"

type sbomOptions struct {
	name, version string    // the image's repository and the release's version
	created       time.Time // the SBOM's timestamp
	binaries      []binary
}

// binary is one executable of the image, for one platform.
type binary struct {
	platform string // os/arch[/variant], as in the image index
	path     string // on this machine (OS/ARCH=BINARY), or in the image (inImage)
	inImage  bool
}

// bomRef names b's component: platform/<file name> for a file on this machine (parseBinaries
// refuses two of one name), platform/<path> for a file in the image, unique however deep it
// lies. The two are the same for the image's top-level files.
func (b binary) bomRef() string {
	if b.inImage {
		return b.platform + b.path
	}
	return b.platform + "/" + filepath.Base(b.path)
}

// application is one binary's application component and the library components of the modules
// compiled into it.
type application struct {
	component cdx.Component
	modules   []cdx.Component
}

// parseBinaries reads OS/ARCH=PATH arguments, sorted by platform and file name so that their
// order on the command line does not change the SBOM.
func parseBinaries(args []string) ([]binary, error) {
	bins := make([]binary, 0, len(args))
	for _, a := range args {
		platform, path, ok := strings.Cut(a, "=")
		if parts := strings.Split(platform, "/"); !ok || path == "" || len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
			return nil, fmt.Errorf("%w: %q is not OS/ARCH=BINARY (e.g. linux/amd64=bin/linux-amd64/manager)", errUsage, a)
		}
		bins = append(bins, binary{platform: platform, path: path})
	}
	slices.SortFunc(bins, func(a, b binary) int {
		return cmp.Or(strings.Compare(a.platform, b.platform), strings.Compare(filepath.Base(a.path), filepath.Base(b.path)))
	})
	for i := 1; i < len(bins); i++ {
		if bins[i].platform == bins[i-1].platform && filepath.Base(bins[i].path) == filepath.Base(bins[i-1].path) {
			return nil, fmt.Errorf("%w: two binaries named %s for %s", errUsage, filepath.Base(bins[i].path), bins[i].platform)
		}
	}
	return bins, nil
}

// parseEpoch reads seconds since 1970 (SOURCE_DATE_EPOCH's format). The SBOM's time is never
// the clock's, so that two runs write the same bytes.
func parseEpoch(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("%w: sbom needs -epoch or $SOURCE_DATE_EPOCH (e.g. git log -1 --format=%%ct)", errUsage)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("%w: epoch %q: want seconds since 1970", errUsage, s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// buildSBOM returns the SBOM of the binaries given on the command line, read one at a time.
func buildSBOM(o sbomOptions) ([]byte, error) {
	if len(o.binaries) == 0 {
		return nil, fmt.Errorf("%w: sbom needs at least one OS/ARCH=BINARY, or -image or -layout", errUsage)
	}
	apps := make([]application, 0, len(o.binaries))
	for _, b := range o.binaries {
		data, err := os.ReadFile(b.path)
		if err != nil {
			return nil, err
		}
		app, err := readBinary(b, data, o.version)
		if err != nil {
			return nil, err
		}
		apps = append(apps, app)
	}
	return writeSBOM(o, apps)
}

// writeSBOM returns the image's CycloneDX JSON SBOM: an application component per binary and
// platform, a library component per Go module compiled into any of them, and which binary
// holds which modules. Everything is read from the binaries, in apps' order; nothing depends
// on the clock or chance.
func writeSBOM(o sbomOptions, apps []application) ([]byte, error) {
	serial := sha256.New()
	fmt.Fprintf(serial, "%s\x00%s\x00%d\x00", o.name, o.version, o.created.Unix())
	libraries := map[string]cdx.Component{}
	components := make([]cdx.Component, 0, len(apps))
	var deps []cdx.Dependency
	for _, a := range apps {
		app := a.component
		fmt.Fprintf(serial, "%s\x00%s\x00", app.BOMRef, (*app.Hashes)[0].Value)
		refs := make([]string, 0, len(a.modules))
		for _, m := range a.modules {
			libraries[m.BOMRef] = m
			refs = append(refs, m.BOMRef)
		}
		slices.Sort(refs)
		components = append(components, app)
		deps = append(deps, cdx.Dependency{Ref: app.BOMRef, Dependencies: &refs})
	}

	appRefs := make([]string, 0, len(components))
	for _, a := range components {
		appRefs = append(appRefs, a.BOMRef)
	}
	for _, ref := range slices.Sorted(maps.Keys(libraries)) {
		components = append(components, libraries[ref])
	}

	bom := cdx.NewBOM()
	bom.SerialNumber = uuidURN(serial.Sum(nil))
	bom.Metadata = &cdx.Metadata{
		Timestamp: o.created.Format(time.RFC3339),
		Tools:     &cdx.ToolsChoice{Components: tools()},
		Component: &cdx.Component{BOMRef: o.name, Type: cdx.ComponentTypeContainer, Name: o.name, Version: o.version},
	}
	bom.Components = &components
	deps = append([]cdx.Dependency{{Ref: o.name, Dependencies: &appRefs}}, deps...)
	bom.Dependencies = &deps

	var buf bytes.Buffer
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true).SetEscapeHTML(false).Encode(bom); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readBinary returns the application component of b, whose bytes are data, and the library
// components of the modules compiled into it. The binary's version is the release's: a
// -buildvcs=false build records "(devel)". A binary in the image also names its path there.
func readBinary(b binary, data []byte, version string) (application, error) {
	info, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return application{}, fmt.Errorf("%s: %w: %w", b.path, errNoBuildInfo, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	goos, goarch := settings["GOOS"], settings["GOARCH"]
	if built := goos + "/" + goarch; !strings.HasPrefix(b.platform+"/", built+"/") {
		return application{}, fmt.Errorf("%s is built for %s, not %s", b.path, built, b.platform)
	}
	if info.Main.Path == "" {
		return application{}, fmt.Errorf("%s: no main module in its build information", b.path)
	}

	pkg, inModule := strings.CutPrefix(info.Path, info.Main.Path+"/") // the main package within the module
	if !inModule {
		pkg = ""
	}
	sum := sha256.Sum256(data)
	props := []cdx.Property{
		{Name: "platform", Value: b.platform},
		{Name: "go.version", Value: info.GoVersion},
		{Name: "go.package", Value: info.Path},
	}
	for _, s := range info.Settings {
		props = append(props, cdx.Property{Name: "go.build." + s.Key, Value: s.Value})
	}
	if b.inImage {
		props = append(props, cdx.Property{Name: "image.path", Value: b.path})
	}
	app := cdx.Component{
		BOMRef:     b.bomRef(),
		Type:       cdx.ComponentTypeApplication,
		Name:       filepath.Base(b.path),
		Version:    version,
		PackageURL: golangPURL(info.Main.Path, version, "goarch="+goarch+"&goos="+goos, pkg),
		Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(sum[:])}},
		Properties: &props,
	}

	mods := make([]cdx.Component, 0, len(info.Deps))
	for _, d := range info.Deps {
		m, modProps := d, []cdx.Property{}
		if d.Replace != nil { // the code compiled in is the replacement's
			m = d.Replace
			modProps = append(modProps, cdx.Property{Name: "go.module.replaces", Value: d.Path + "@" + d.Version})
		}
		if m.Sum != "" {
			modProps = append(modProps, cdx.Property{Name: "go.module.sum", Value: m.Sum})
		}
		purl := golangPURL(m.Path, m.Version, "", "")
		c := cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: purl}
		if len(modProps) > 0 {
			c.Properties = &modProps
		}
		mods = append(mods, c)
	}
	return application{component: app, modules: mods}, nil
}

// golangPURL is a Go module's package URL (github.com/package-url/purl-spec, type golang):
// pkg:golang/<module path>@<version>[?<qualifiers>][#<package in the module>].
func golangPURL(path, version, qualifiers, subpath string) string {
	purl := "pkg:golang/" + path
	if version != "" {
		purl += "@" + strings.ReplaceAll(version, "+", "%2B")
	}
	if qualifiers != "" {
		purl += "?" + qualifiers
	}
	if subpath != "" {
		purl += "#" + subpath
	}
	return purl
}

// uuidURN formats the first 16 bytes of a hash as a version 5 (name-based) UUID, the form
// CycloneDX's serialNumber takes.
func uuidURN(h []byte) string {
	u := slices.Clone(h[:16])
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	x := hex.EncodeToString(u)
	return "urn:uuid:" + x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// tools are this command and the CycloneDX library it writes with, for metadata.tools.
func tools() *[]cdx.Component {
	t := []cdx.Component{{Type: cdx.ComponentTypeApplication, Name: toolName}}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/CycloneDX/cyclonedx-go" {
				t = append(t, cdx.Component{Type: cdx.ComponentTypeLibrary, Name: d.Path, Version: d.Version, PackageURL: golangPURL(d.Path, d.Version, "", "")})
			}
		}
	}
	return &t
}
