package main

import (
	"crypto"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// passwordEnv holds the private key's password, as for the cosign CLI.
const passwordEnv = "COSIGN_PASSWORD"

// keygen writes a new ECDSA P-256 key pair in cosign's format: cosign.key (the private key,
// encrypted with password) and cosign.pub, as `cosign generate-key-pair` does.
func keygen(dir string, password []byte, stdout io.Writer) error {
	keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return err
	}
	priv, pub := filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	if err := writeNew(priv, keys.PrivateBytes, 0o600); err != nil {
		return err
	}
	if err := writeNew(pub, keys.PublicBytes, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", priv, pub)
	return nil
}

// writeNew writes a file that must not exist yet: a key pair is never overwritten.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// loadSigner reads a cosign private key (ENCRYPTED SIGSTORE PRIVATE KEY PEM) with its password.
func loadSigner(path string, password []byte) (signature.SignerVerifier, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sv, err := cosign.LoadPrivateKey(pem, password, nil)
	if err != nil {
		return nil, fmt.Errorf("loading %s with the password in $%s: %w", path, passwordEnv, err)
	}
	return sv, nil
}

// loadVerifier reads a PEM public key as `cosign verify --key FILE` does (SHA-256).
func loadVerifier(path string) (signature.Verifier, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pem)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return signature.LoadVerifier(pub, crypto.SHA256)
}
