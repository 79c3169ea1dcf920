package main

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	ggcrmutate "github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ggcrstatic "github.com/google/go-containerregistry/pkg/v1/static"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
	cremote "github.com/sigstore/cosign/v3/pkg/cosign/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	"github.com/sigstore/cosign/v3/pkg/types"
)

// startRegistry serves an in-memory OCI registry with the referrers API on 127.0.0.1 (plain
// HTTP, as go-containerregistry and cosign assume for loopback addresses).
func startRegistry(t *testing.T) string {
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// pushIndex pushes a two-platform OCI index of two tiny images, distinct per seed, and
// returns it by digest.
func pushIndex(t *testing.T, repo, seed string) name.Digest {
	t.Helper()
	idx := v1.ImageIndex(empty.Index)
	for _, arch := range []string{"amd64", "arm64"} {
		idx = appendPlatform(t, idx, arch, ggcrstatic.NewLayer([]byte(seed+" "+arch), ggcrtypes.OCILayer))
	}
	return pushIndexAs(t, repo, seed, idx)
}

// appendPlatform is idx with an OCI image of layers for linux/arch appended.
func appendPlatform(t *testing.T, idx v1.ImageIndex, arch string, layers ...v1.Layer) v1.ImageIndex {
	t.Helper()
	img := ggcrmutate.ConfigMediaType(ggcrmutate.MediaType(empty.Image, ggcrtypes.OCIManifestSchema1), ggcrtypes.OCIConfigJSON)
	img, err := ggcrmutate.AppendLayers(img, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	if img, err = ggcrmutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return ggcrmutate.AppendManifests(idx, ggcrmutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
}

// pushIndexAs pushes idx to repo:tag and returns it by digest.
func pushIndexAs(t *testing.T, repo, tag string, idx v1.ImageIndex) name.Digest {
	t.Helper()
	ref, err := name.NewTag(repo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	h, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return ref.Context().Digest(h.String())
}

// keyPair writes a cosign key pair into a new directory and returns its private and public
// key files.
func keyPair(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := release(t, "keygen", "-dir", dir); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
}

// copyTag points dst's cosign tag (.sig or .att) at src's: a signature made for src, shown
// for dst.
func copyTag(t *testing.T, src, dst name.Digest, tagOf func(name.Reference, ...ociremote.Option) (name.Tag, error)) {
	t.Helper()
	from, _ := tagOf(src)
	to, _ := tagOf(dst)
	desc, err := remote.Get(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Tag(to, desc); err != nil {
		t.Fatal(err)
	}
}

// tamperAttestation replaces d's attestation with one whose statement says another version,
// keeping the old DSSE signature.
func tamperAttestation(t *testing.T, d name.Digest) {
	t.Helper()
	tag, _ := ociremote.AttestationTag(d)
	sigs, err := ociremote.Signatures(tag)
	if err != nil {
		t.Fatal(err)
	}
	atts, err := sigs.Get()
	if err != nil || len(atts) != 1 {
		t.Fatalf("attestations of %s: %d, %v", d, len(atts), err)
	}
	raw, _ := atts[0].Payload()
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	statement, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
	tampered := bytes.ReplaceAll(statement, []byte(`"9.9.9"`), []byte(`"6.6.6"`))
	if bytes.Equal(tampered, statement) {
		t.Fatal("the statement does not carry the SBOM's version")
	}
	env["payload"] = base64.StdEncoding.EncodeToString(tampered)
	raw, _ = json.Marshal(env)
	att, err := static.NewAttestation(raw, static.WithLayerMediaType(types.DssePayloadType))
	if err != nil {
		t.Fatal(err)
	}
	se, err := mutate.AttachAttestationToEntity(ociremote.SignedUnknown(d), att, mutate.WithReplaceOp(cremote.NewReplaceOp(cyclonedxPredicate)))
	if err != nil {
		t.Fatal(err)
	}
	if err := ociremote.WriteAttestations(d.Repository, se); err != nil {
		t.Fatal(err)
	}
}

func TestSignVerify(t *testing.T) {
	bins, err := testBinaries()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(passwordEnv, "test password")
	dir := t.TempDir()
	bom := writeTestSBOM(t, dir, "bom.json", bins)
	key, pub := keyPair(t)
	_, otherPub := keyPair(t)
	repo := startRegistry(t) + "/intutic/gate-operator"
	sign := func(d name.Digest) {
		t.Helper()
		if _, err := release(t, "sign", "-key", key, "-sbom", bom, "-identity", "ghcr.io/intutic/gate-operator", d.String()); err != nil {
			t.Fatal(err)
		}
	}

	signed := pushIndex(t, repo, "signed")
	sign(signed)
	sign(signed) // again: still one signature, one SBOM attestation
	out, err := release(t, "verify", "-key", pub, "-sbom", bom, signed.String())
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	t.Logf("verify:\n%s", out)
	for _, want := range []string{
		"verified signature: " + signed.String() + " identity=ghcr.io/intutic/gate-operator digest=" + signed.DigestStr(),
		"verified SBOM attestation: " + signed.String() + " predicate=https://cyclonedx.org/bom serial=urn:uuid:",
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("verify printed %q %d times, want once", want, strings.Count(out, want))
		}
	}
	if strings.Count(out, "\n") != 2 {
		t.Errorf("verify printed %d lines, want one signature and one attestation", strings.Count(out, "\n"))
	}

	// The SBOM is also the index's OCI 1.1 referrer, unsigned.
	referrers, err := remote.Referrers(signed)
	if err != nil {
		t.Fatal(err)
	}
	list, err := referrers.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Manifests) != 1 {
		t.Fatalf("referrers of %s: %+v, want the SBOM", signed, list.Manifests)
	}
	art, err := remote.Image(signed.Context().Digest(list.Manifests[0].Digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := art.Manifest()
	layers, _ := art.Layers()
	want, _ := os.ReadFile(bom)
	if m.ArtifactType != sbomMediaType || len(layers) != 1 {
		t.Fatalf("the referrer: artifactType %q, %d layers; want %s, one layer", m.ArtifactType, len(layers), sbomMediaType)
	}
	rc, _ := layers[0].Compressed()
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, want) {
		t.Error("the referrer's layer is not the SBOM")
	}

	tamperedBOM := filepath.Join(dir, "tampered.json")
	if err := os.WriteFile(tamperedBOM, bytes.Replace(want, []byte(`"9.9.9"`), []byte(`"6.6.6"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		seed    string            // a new image, or "" for the signed one
		sign    bool              // sign the new image
		change  func(name.Digest) // then change what it carries
		key     string            // the public key, or "" for the signer's
		sbom    string            // the SBOM verify expects, or "" for any
		wantErr string
	}{
		{name: "another key", key: otherPub, wantErr: "signature: no matching signatures"},
		{name: "unsigned", seed: "unsigned", wantErr: "signature: no signatures found"},
		{name: "another digest's signature", seed: "copied-sig", wantErr: "invalid or missing digest in claim",
			change: func(d name.Digest) { copyTag(t, signed, d, ociremote.SignatureTag) }},
		{name: "another digest's attestation", seed: "copied-att", sign: true, wantErr: "SBOM attestation: no matching attestations",
			change: func(d name.Digest) { copyTag(t, signed, d, ociremote.AttestationTag) }},
		{name: "a tampered attestation", seed: "tampered", sign: true, wantErr: "SBOM attestation: no matching attestations",
			change: func(d name.Digest) { tamperAttestation(t, d) }},
		{name: "another SBOM", sbom: tamperedBOM, wantErr: "the attested SBOM is not the expected one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := signed
			if tc.seed != "" {
				d = pushIndex(t, repo, tc.seed)
			}
			if tc.sign {
				sign(d)
			}
			if tc.change != nil {
				tc.change(d)
			}
			args := []string{"verify", "-key", cmp.Or(tc.key, pub)}
			if tc.sbom != "" {
				args = append(args, "-sbom", tc.sbom)
			}
			out, err := release(t, append(args, d.String())...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("verify: %v (printed %q); want an error containing %q", err, out, tc.wantErr)
			}
		})
	}

	t.Run("by tag", func(t *testing.T) {
		if _, err := release(t, "sign", "-key", key, "-sbom", bom, repo+":signed"); err == nil || !strings.Contains(err.Error(), "by digest") {
			t.Errorf("sign of a tag: %v, want an error asking for a digest", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		t.Setenv(passwordEnv, "not the password")
		if _, err := release(t, "sign", "-key", key, "-sbom", bom, signed.String()); err == nil || !strings.Contains(err.Error(), passwordEnv) {
			t.Errorf("sign with the wrong password: %v", err)
		}
	})
}
