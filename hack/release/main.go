// Command release makes and checks what a gate-operator release attaches to its images: a
// CycloneDX SBOM read from the binaries' Go build information, a cosign signature of each image,
// a signed in-toto attestation carrying the SBOM, and the SBOM as an OCI 1.1 referrer. It writes
// them with cosign's own libraries, in the layout `cosign verify --key` and Kyverno's
// verifyImages read, and verifies them the same way.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const usage = `usage: release <command> [flags] [args]
  (a module of its own: hack/build-tool.sh bin/release hack/release builds it; go run -C hack/release .
  runs it, with relative paths then taken from hack/release)

commands:
  keygen -dir DIR
        write a new cosign key pair: DIR/cosign.key (encrypted with $COSIGN_PASSWORD) and DIR/cosign.pub
  sbom -name IMAGE -version VERSION [-epoch SECONDS] [-o FILE] OS/ARCH=BINARY...
  sbom -name IMAGE -version VERSION [-epoch SECONDS] [-o FILE] [-plain-http] -image REPO@sha256:DIGEST
  sbom -name IMAGE -version VERSION [-epoch SECONDS] [-o FILE] -layout DIR -ref NAME
        write one image's CycloneDX JSON SBOM from its binaries' Go build information: the binaries
        given, or every Go binary in each platform's image of an image index, in a registry or in the
        OCI image layout DIR under its org.opencontainers.image.ref.name NAME (a binary's path in the
        image is its component's image.path property); the same binaries and flags give the same
        bytes (the time is -epoch, default $SOURCE_DATE_EPOCH)
  sign -key cosign.key -sbom FILE [-identity REPO] [-referrer=false] [-plain-http] IMAGE@sha256:DIGEST...
        sign each image (cosign's sha256-<hex>.sig tag), attest its SBOM (signed in-toto statement,
        predicate https://cyclonedx.org/bom, sha256-<hex>.att tag) and attach the SBOM as an OCI referrer;
        the key's password is $COSIGN_PASSWORD
  verify -key cosign.pub [-sbom FILE] [-plain-http] IMAGE...
        verify each image's signature and SBOM attestation with cosign's library, offline (no
        transparency log); with -sbom, the attested SBOM must be that file's

"release <command> -h" lists a command's flags. 127.0.0.1 and localhost registries are plain HTTP.
The same checks with the cosign CLI:
  cosign verify --key cosign.pub --insecure-ignore-tlog IMAGE@sha256:DIGEST
  cosign verify-attestation --key cosign.pub --type cyclonedx --insecure-ignore-tlog IMAGE@sha256:DIGEST
`

// errUsage marks a command line that cannot run; main prints the usage and exits 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintf(os.Stderr, "release: %v\n\n%s", err, usage)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// commands are the subcommands: each defines its flags on fs, parses args and runs.
var commands = map[string]func(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer) error{
	"keygen": keygenCommand,
	"sbom":   sbomCommand,
	"sign":   signCommand,
	"verify": verifyCommand,
}

// run runs one command: what it did goes to stdout, flag errors and cosign's notes to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no command", errUsage)
	}
	switch cmd := args[0]; cmd {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		command, ok := commands[cmd]
		if !ok {
			return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
		}
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		fs.SetOutput(stderr)
		return command(ctx, fs, args[1:], stdout)
	}
}

func keygenCommand(_ context.Context, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	dir := fs.String("dir", ".", "directory for cosign.key and cosign.pub (neither may exist)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	return keygen(*dir, []byte(os.Getenv(passwordEnv)), stdout)
}

func sbomCommand(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	var o sbomOptions
	fs.StringVar(&o.name, "name", "", "the image's repository, e.g. ghcr.io/intutic/gate-operator (required)")
	fs.StringVar(&o.version, "version", "", "the release's version, e.g. the chart's appVersion (required)")
	epoch := fs.String("epoch", os.Getenv("SOURCE_DATE_EPOCH"), "the SBOM's time, in seconds since 1970")
	out := fs.String("o", "-", `output file; "-" is stdout`)
	image := fs.String("image", "", "read the binaries from this image index in a registry, by digest (REPO@sha256:DIGEST)")
	plainHTTP := fs.Bool("plain-http", false, "with -image: talk HTTP to the registry (127.0.0.1 and localhost are HTTP anyway)")
	dir := fs.String("layout", "", "read the binaries from an image index in this OCI image layout (with -ref)")
	ref := fs.String("ref", "", "with -layout: the index's org.opencontainers.image.ref.name, e.g. ghcr.io/intutic/gate-operator:0.1.0")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.name == "" || o.version == "" {
		return fmt.Errorf("%w: sbom needs -name and -version", errUsage)
	}
	var err error
	if o.created, err = parseEpoch(*epoch); err != nil {
		return err
	}
	var idx v1.ImageIndex // the image to read the binaries from, if any
	switch {
	case (*image != "" || *dir != "") && fs.NArg() > 0:
		return fmt.Errorf("%w: sbom reads an image's binaries from -image or -layout, or takes them as OS/ARCH=BINARY, not both", errUsage)
	case *image != "" && *dir != "":
		return fmt.Errorf("%w: sbom takes -image or -layout, not both", errUsage)
	case (*dir == "") != (*ref == ""):
		return fmt.Errorf("%w: sbom takes -layout and -ref together", errUsage)
	case *image != "":
		idx, err = remoteIndex(ctx, *image, *plainHTTP)
	case *dir != "":
		idx, err = layoutIndex(*dir, *ref)
	default:
		o.binaries, err = parseBinaries(fs.Args())
	}
	if err != nil {
		return err
	}
	var bom []byte
	if idx != nil {
		bom, err = imageSBOM(o, idx)
	} else {
		bom, err = buildSBOM(o)
	}
	if err != nil {
		return err
	}
	if *out == "-" {
		_, err = stdout.Write(bom)
		return err
	}
	return os.WriteFile(*out, bom, 0o644)
}

func signCommand(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	var f imageFlags
	var o signOptions
	f.register(fs, "cosign private key (cosign.key; password from $"+passwordEnv+") (required)", "the image's CycloneDX JSON SBOM (required)")
	fs.StringVar(&o.identity, "identity", "", "the docker-reference the signature claims; default: the repository signed in")
	fs.BoolVar(&o.referrer, "referrer", true, "also attach the SBOM as an OCI 1.1 referrer (unsigned)")
	if err := parse(fs, args, -1); err != nil {
		return err
	}
	if f.key == "" || f.sbom == "" {
		return fmt.Errorf("%w: sign needs -key and -sbom", errUsage)
	}
	var err error
	if o.signer, err = loadSigner(f.key, []byte(os.Getenv(passwordEnv))); err != nil {
		return err
	}
	if o.sbom, err = os.ReadFile(f.sbom); err != nil {
		return err
	}
	return eachImage(fs.Args(), func(ref string) error { return signImage(ctx, ref, f.plainHTTP, o, stdout) })
}

func verifyCommand(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	var f imageFlags
	var o verifyOptions
	f.register(fs, "cosign public key (cosign.pub) (required)", "the SBOM the attestation must carry (optional)")
	if err := parse(fs, args, -1); err != nil {
		return err
	}
	if f.key == "" {
		return fmt.Errorf("%w: verify needs -key", errUsage)
	}
	var err error
	if o.verifier, err = loadVerifier(f.key); err != nil {
		return err
	}
	if f.sbom != "" {
		if o.sbom, err = os.ReadFile(f.sbom); err != nil {
			return err
		}
	}
	return eachImage(fs.Args(), func(ref string) error { return verifyImage(ctx, ref, f.plainHTTP, o, stdout) })
}

// imageFlags are the flags sign and verify share.
type imageFlags struct {
	key, sbom string
	plainHTTP bool
}

func (f *imageFlags) register(fs *flag.FlagSet, keyUsage, sbomUsage string) {
	fs.StringVar(&f.key, "key", "", keyUsage)
	fs.StringVar(&f.sbom, "sbom", "", sbomUsage)
	fs.BoolVar(&f.plainHTTP, "plain-http", false, "talk HTTP to the registry (127.0.0.1 and localhost are HTTP anyway)")
}

// eachImage runs do for every image, also after one fails, and returns every failure, each
// naming its image.
func eachImage(refs []string, do func(ref string) error) error {
	var errs []error
	for _, ref := range refs {
		if err := do(ref); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
		}
	}
	return errors.Join(errs...)
}

// parse parses a command's flags; arguments are required (-1) or not allowed (0).
func parse(fs *flag.FlagSet, args []string, nargs int) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case nargs == 0 && fs.NArg() > 0:
		return fmt.Errorf("%w: %s takes no arguments, got %q", errUsage, fs.Name(), fs.Args())
	case nargs < 0 && fs.NArg() == 0:
		return fmt.Errorf("%w: %s needs at least one argument", errUsage, fs.Name())
	}
	return nil
}
