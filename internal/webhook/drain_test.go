package webhook

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestShutdownDrains: the server is not ready before its certificate is in place; once the
// manager stops (a rollout deletes the pod), it keeps answering for ShutdownDelay, while the
// Service's endpoints drop the pod, closing each connection after its answer so the API
// server's kept-alive connections move to the other replicas; /readyz's webhook check fails
// meanwhile, and then the server stops. Without the delay, an admission routed to the pod in
// the instant before kube-proxy drops it is refused (connection refused, and the webhooks are
// failurePolicy Fail).
func TestShutdownDrains(t *testing.T) {
	dir := t.TempDir()
	writeSelfSignedCert(t, dir)
	port := freePort(t)
	const delay = 2 * time.Second
	s := NewServer(Options{Host: "127.0.0.1", Port: port, Certs: CertOptions{Mode: CertsExternal, Dir: dir}, ShutdownDelay: delay})
	s.Register("/ok", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	// Until its certificate is in place the server does not listen, and the replica is not ready.
	check := s.readyChecker()
	time.Sleep(200 * time.Millisecond)
	if err := check(nil); err == nil {
		t.Errorf("/readyz's webhook check passes before the certificate is in place")
	}
	close(s.ready)
	deadline := time.Now().Add(10 * time.Second)
	for check(nil) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the server does not serve: %v", check(nil))
		}
		time.Sleep(20 * time.Millisecond)
	}

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a test server's own certificate
	url := fmt.Sprintf("https://127.0.0.1:%d/ok", port)
	get := func() (*http.Response, error) {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	resp, err := get()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Close {
		t.Errorf("before the shutdown, the answer closes the connection")
	}

	stopped := time.Now()
	cancel()
	time.Sleep(100 * time.Millisecond)
	for time.Since(stopped) < delay-500*time.Millisecond {
		resp, err := get()
		if err != nil {
			t.Fatalf("%s after the stop, within the %s delay: %v", time.Since(stopped).Round(time.Millisecond), delay, err)
		}
		if !resp.Close {
			t.Errorf("a draining answer keeps the connection open (want Connection: close)")
		}
		if err := check(nil); err == nil {
			t.Errorf("/readyz's webhook check passes while the server drains")
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case err := <-done:
		done <- err // for the cleanup
	case <-time.After(delay + 5*time.Second):
		t.Fatalf("the server still runs %s after the stop", delay+5*time.Second)
	}
	if took := time.Since(stopped); took < delay {
		t.Errorf("the server stopped %s after the stop, before its %s delay", took, delay)
	}
	if _, err := get(); err == nil {
		t.Errorf("the server still answers after it stopped")
	}
}

// writeSelfSignedCert writes tls.crt and tls.key for 127.0.0.1 into dir.
func writeSelfSignedCert(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
}
