// Command genkey writes a 2048-bit RSA key pair as PEM (PKCS#1 private key, PKIX public key):
// the service-account signing keys of the local control plane. Usage: genkey KEY PUB
package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: genkey KEY PUB")
		os.Exit(2)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	check(err)
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	check(err)
	check(os.WriteFile(os.Args[1], pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	check(os.WriteFile(os.Args[2], pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
