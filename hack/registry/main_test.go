package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPushAndPull: push writes each index of a layout to its repository and tag on the
// registry and prints its digest; the index is then pulled by that digest from the open address
// and, with the credentials only, from the authenticated one.
func TestPushAndPull(t *testing.T) {
	idx, err := random.Index(64, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "ghcr.io/intutic/gate-operator:v0.1.0"})); err != nil {
		t.Fatal(err)
	}
	h := registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(t.TempDir())))
	open := httptest.NewServer(h)
	defer open.Close()
	authed := httptest.NewServer(basicAuth(h, "puller", "s3cret"))
	defer authed.Close()
	host := strings.TrimPrefix(open.URL, "http://")

	var out bytes.Buffer
	if err := push([]string{"-layout", dir, "-registry", host}, &out); err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if got := out.String(); got != "ghcr.io/intutic/gate-operator:v0.1.0 "+want.String()+"\n" {
		t.Fatalf("push printed %q, want the ref and %s", got, want)
	}
	byDigest, _ := name.NewDigest(host + "/intutic/gate-operator@" + want.String())
	if _, err := remote.Index(byDigest); err != nil {
		t.Fatalf("pulling the index by digest: %v", err)
	}
	tagged, _ := name.NewTag(host + "/intutic/gate-operator:v0.1.0")
	if d, err := remote.Head(tagged); err != nil || d.Digest != want {
		t.Fatalf("the tag names %v (%v), want %s", d, err, want)
	}

	authHost := strings.TrimPrefix(authed.URL, "http://")
	viaAuth, _ := name.NewDigest(authHost + "/intutic/gate-operator@" + want.String())
	if _, err := remote.Index(viaAuth); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(err.Error(), "UNAUTHORIZED") {
		t.Fatalf("an anonymous pull from the authenticated address: %v", err)
	}
	if _, err := remote.Index(viaAuth, remote.WithAuth(&authn.Basic{Username: "puller", Password: "wrong"})); err == nil {
		t.Fatal("a wrong password pulls")
	}
	if _, err := remote.Index(viaAuth, remote.WithAuth(&authn.Basic{Username: "puller", Password: "s3cret"})); err != nil {
		t.Fatalf("pulling with the credentials: %v", err)
	}
	resp, err := http.Get(authed.URL + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("challenge: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}
