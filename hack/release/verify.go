package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// cyclonedxPredicate is the in-toto predicate type of a CycloneDX SBOM: cosign's
// `--type cyclonedx`, Kyverno's `attestations[].type`.
const cyclonedxPredicate = "https://cyclonedx.org/bom"

type verifyOptions struct {
	verifier signature.Verifier
	sbom     []byte // the SBOM the attestation must carry, or nil for any
}

// verifyImage checks one image as `cosign verify --key --insecure-ignore-tlog` and
// `cosign verify-attestation --key --type cyclonedx --insecure-ignore-tlog` do, with the
// functions those commands call: a signature by the key whose claim names the image's digest,
// and a CycloneDX attestation by the key whose subject is that digest.
func verifyImage(ctx context.Context, ref string, plainHTTP bool, o verifyOptions, stdout io.Writer) error {
	r, err := name.ParseReference(ref, nameOptions(plainHTTP)...)
	if err != nil {
		return err
	}
	co := &cosign.CheckOpts{
		RegistryClientOpts: registryOptions(ctx, plainHTTP),
		SigVerifier:        o.verifier,
		ClaimVerifier:      cosign.SimpleClaimVerifier,
		// Offline: no transparency log and no certificate log to check against.
		IgnoreTlog: true,
		IgnoreSCT:  true,
	}
	sigs, _, err := cosign.VerifyImageSignatures(ctx, r, co)
	if err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	for _, s := range sigs {
		pl, err := s.Payload()
		if err != nil {
			return err
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(pl, &p); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "verified signature: %s identity=%s digest=%s\n", ref, p.Critical.Identity.DockerReference, p.Critical.Image.DockerManifestDigest)
	}

	co.ClaimVerifier = cosign.IntotoSubjectClaimVerifier
	atts, _, err := cosign.VerifyImageAttestations(ctx, r, co)
	if err != nil {
		return fmt.Errorf("SBOM attestation: %w", err)
	}
	found := 0
	var mismatch error
	for _, a := range atts {
		st, err := readStatement(a.Payload)
		if err != nil {
			return err
		}
		if st.PredicateType != cyclonedxPredicate {
			continue
		}
		if o.sbom != nil {
			if err := sameJSON(st.Predicate, o.sbom); err != nil {
				mismatch = err
				continue
			}
		}
		found++
		var bom struct {
			SerialNumber string            `json:"serialNumber"`
			Components   []json.RawMessage `json:"components"`
		}
		if err := json.Unmarshal(st.Predicate, &bom); err != nil {
			return fmt.Errorf("the attested SBOM: %w", err)
		}
		fmt.Fprintf(stdout, "verified SBOM attestation: %s predicate=%s serial=%s components=%d\n", ref, st.PredicateType, bom.SerialNumber, len(bom.Components))
	}
	if found == 0 {
		return errors.Join(fmt.Errorf("SBOM attestation: none of %d verified attestations has predicate type %s", len(atts), cyclonedxPredicate), mismatch)
	}
	return nil
}

// statement is the part of an in-toto statement the verification reads.
type statement struct {
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

// readStatement decodes a verified DSSE envelope's in-toto statement.
func readStatement(envelope func() ([]byte, error)) (statement, error) {
	raw, err := envelope()
	if err != nil {
		return statement{}, err
	}
	var env struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return statement{}, fmt.Errorf("attestation envelope: %w", err)
	}
	data, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return statement{}, fmt.Errorf("attestation payload: %w", err)
	}
	var st statement
	if err := json.Unmarshal(data, &st); err != nil {
		return statement{}, fmt.Errorf("in-toto statement: %w", err)
	}
	return st, nil
}

// sameJSON compares the attested SBOM with the expected one as JSON values: the statement
// re-encodes the SBOM (key order, spacing), so bytes differ where values do not.
func sameJSON(got, want []byte) error {
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		return fmt.Errorf("the attested SBOM: %w", err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		return fmt.Errorf("the expected SBOM: %w", err)
	}
	if !reflect.DeepEqual(g, w) {
		return errors.New("the attested SBOM is not the expected one")
	}
	return nil
}
