package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ggcrstatic "github.com/google/go-containerregistry/pkg/v1/static"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/cosign/v3/pkg/cosign/attestation"
	cremote "github.com/sigstore/cosign/v3/pkg/cosign/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	"github.com/sigstore/cosign/v3/pkg/types"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

type signOptions struct {
	signer   signature.SignerVerifier
	sbom     []byte // CycloneDX JSON
	identity string // the claimed docker-reference, or "" for the repository signed in
	referrer bool   // also attach the SBOM as an OCI 1.1 referrer
}

// signImage signs one image by digest and attests its SBOM, in cosign's tag layout (what
// `cosign sign --key` and `cosign attest --key --type cyclonedx` write with
// --tlog-upload=false --new-bundle-format=false), then attaches the SBOM as a referrer.
// Signing again with the same key adds no second signature; a new SBOM attestation replaces
// the old one.
func signImage(ctx context.Context, ref string, plainHTTP bool, o signOptions, stdout io.Writer) error {
	d, err := name.NewDigest(ref, nameOptions(plainHTTP)...)
	if err != nil {
		return fmt.Errorf("sign takes an image by digest (REPO@sha256:...), so that what is signed cannot move: %w", err)
	}
	opts := registryOptions(ctx, plainHTTP)
	if err := writeSignature(d, o, opts); err != nil {
		return fmt.Errorf("writing the signature: %w", err)
	}
	sigTag, _ := ociremote.SignatureTag(d, opts...)
	fmt.Fprintf(stdout, "signed %s: %s\n", d, sigTag)
	if err := writeAttestation(d, o, opts); err != nil {
		return fmt.Errorf("writing the SBOM attestation: %w", err)
	}
	attTag, _ := ociremote.AttestationTag(d, opts...)
	fmt.Fprintf(stdout, "attested %s: %s (%s)\n", d, attTag, cyclonedxPredicate)
	if !o.referrer {
		return nil
	}
	// The manifest `oras attach --artifact-type application/vnd.cyclonedx+json` writes: an
	// empty config, the SBOM as its one layer, the image as its subject. The SBOM is
	// deterministic, so attaching it again writes the same manifest.
	sbom := ggcrstatic.NewLayer(o.sbom, ggcrtypes.MediaType(sbomMediaType))
	if err := ociremote.WriteReferrer(d, sbomMediaType, []v1.Layer{sbom}, nil, opts...); err != nil {
		return fmt.Errorf("attaching the SBOM as a referrer: %w", err)
	}
	fmt.Fprintf(stdout, "attached %s: SBOM referrer (%s)\n", d, sbomMediaType)
	return nil
}

// writeSignature writes a signature of d's digest (cosign's simple-signing payload) to d's .sig
// tag. The signed entity is only the digest: nothing of the image is fetched.
func writeSignature(d name.Digest, o signOptions, opts []ociremote.Option) error {
	pl, err := payload.Cosign{Image: d, ClaimedIdentity: o.identity}.MarshalJSON()
	if err != nil {
		return err
	}
	raw, err := o.signer.SignMessage(bytes.NewReader(pl))
	if err != nil {
		return err
	}
	sig, err := static.NewSignature(pl, base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		return err
	}
	se, err := mutate.AttachSignatureToEntity(ociremote.SignedUnknown(d, opts...), sig, mutate.WithDupeDetector(cremote.NewDupeDetector(o.signer)))
	if err != nil {
		return err
	}
	return ociremote.WriteSignatures(d.Repository, se, opts...)
}

// writeAttestation writes the SBOM as a DSSE-signed in-toto statement about d's digest to d's
// .att tag, in place of an earlier CycloneDX attestation.
func writeAttestation(d name.Digest, o signOptions, opts []ociremote.Option) error {
	st, err := attestation.GenerateStatement(attestation.GenerateOpts{
		Predicate: bytes.NewReader(o.sbom),
		Type:      "cyclonedx",
		Digest:    d.DigestStr()[len("sha256:"):],
		Repo:      d.Repository.String(),
	})
	if err != nil {
		return fmt.Errorf("the SBOM as an in-toto statement: %w", err)
	}
	statement, err := st.MarshalJSON()
	if err != nil {
		return err
	}
	envelope, err := dsse.WrapSigner(o.signer, types.IntotoPayloadType).SignMessage(bytes.NewReader(statement))
	if err != nil {
		return err
	}
	att, err := static.NewAttestation(envelope,
		static.WithLayerMediaType(types.DssePayloadType),
		static.WithAnnotations(map[string]string{"predicateType": st.PredicateType}))
	if err != nil {
		return err
	}
	se, err := mutate.AttachAttestationToEntity(ociremote.SignedUnknown(d, opts...), att, mutate.WithReplaceOp(cremote.NewReplaceOp(st.PredicateType)))
	if err != nil {
		return err
	}
	return ociremote.WriteAttestations(d.Repository, se, opts...)
}

// registryOptions are cosign's registry options: remoteOptions, HTTP when asked.
func registryOptions(ctx context.Context, plainHTTP bool) []ociremote.Option {
	return []ociremote.Option{
		ociremote.WithRemoteOptions(remoteOptions(ctx)...),
		ociremote.WithNameOptions(nameOptions(plainHTTP)...),
	}
}

// remoteOptions are go-containerregistry's: credentials from the Docker config, as the cosign
// CLI reads them.
func remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithContext(ctx)}
}

// nameOptions makes a registry plain HTTP; go-containerregistry already treats localhost,
// 127.0.0.0/8 and private addresses so.
func nameOptions(plainHTTP bool) []name.Option {
	if plainHTTP {
		return []name.Option{name.Insecure}
	}
	return nil
}
