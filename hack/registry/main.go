// Command registry is the local cluster's OCI registry (go-containerregistry's registry
// package), and the tool that pushes `make images`' OCI layout into it. The local node's
// containerd names it the server of every registry host (hack/lib/node.sh writes its hosts.toml),
// so a pod's image is pulled from it, by digest, and no pull ever leaves the machine.
//
//	registry serve -addr 127.0.0.1:P [-auth-addr 127.0.0.1:P2 -credentials FILE] -blobs DIR
//	registry push -layout bin/images/oci -registry 127.0.0.1:P
//
// serve answers on -addr without credentials, and on -auth-addr the same repositories only to a
// client presenting the user and password of -credentials ("user:password"; the pull-secret
// case). Blobs are kept under -blobs; manifests and tags in memory, so a restarted registry is
// pushed to again. Each request is logged on stderr (method, path, status), never a header.
//
// push writes every image index of an OCI layout (each named by its
// org.opencontainers.image.ref.name annotation, such as ghcr.io/intutic/gate-operator:v0.1.0)
// to the same repository path and tag on -registry, and prints "<ref> <index digest>".
package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: registry serve|push [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "push":
		err = push(os.Args[2:], os.Stdout)
	default:
		err = fmt.Errorf("unknown command %q: serve or push", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:5000", "address answered without credentials")
	authAddr := fs.String("auth-addr", "", "address answered only with the credentials of -credentials (empty: none)")
	credentials := fs.String("credentials", "", `file holding "user:password" for -auth-addr`)
	blobs := fs.String("blobs", "", "directory the blobs are kept in (required)")
	_ = fs.Parse(args)
	if *blobs == "" {
		return errors.New("serve: -blobs is required")
	}
	if err := os.MkdirAll(*blobs, 0o700); err != nil {
		return err
	}
	logger := log.New(os.Stderr, "", log.LstdFlags)
	h := registry.New(registry.Logger(logger), registry.WithReferrersSupport(true), registry.WithBlobHandler(registry.NewDiskBlobHandler(*blobs)))
	servers := []*http.Server{{Addr: *addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	if *authAddr != "" {
		user, password, err := readCredentials(*credentials)
		if err != nil {
			return err
		}
		servers = append(servers, &http.Server{Addr: *authAddr, Handler: basicAuth(h, user, password), ReadHeaderTimeout: 10 * time.Second})
	}
	errs := make(chan error, len(servers))
	for _, s := range servers {
		l, err := net.Listen("tcp", s.Addr)
		if err != nil {
			return err
		}
		logger.Printf("serving on %s", s.Addr)
		go func() { errs <- s.Serve(l) }()
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-errs:
		return err
	case <-stop:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(ctx)
	}
	return nil
}

// readCredentials reads "user:password" from path.
func readCredentials(path string) (user, password string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("reading -credentials: %w", err)
	}
	user, password, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	if !ok || user == "" || password == "" {
		return "", "", fmt.Errorf("-credentials %s does not hold user:password", path)
	}
	return user, password, nil
}

// basicAuth answers only requests with the user and password, and challenges the others as a
// registry does (401 with WWW-Authenticate: Basic), so containerd and helm send them.
func basicAuth(next http.Handler, user, password string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user))&subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
			log.Printf("%s %s 401 UNAUTHORIZED", r.Method, r.URL)
			w.Header().Set("WWW-Authenticate", `Basic realm="gate-local-registry"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func push(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	dir := fs.String("layout", "bin/images/oci", "OCI image layout whose indexes are pushed")
	reg := fs.String("registry", "", "host:port of the registry (plain HTTP on 127.0.0.1 and localhost)")
	_ = fs.Parse(args)
	if *reg == "" {
		return errors.New("push: -registry is required")
	}
	p, err := layout.FromPath(*dir)
	if err != nil {
		return fmt.Errorf("reading the OCI layout %s: %w", *dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) == 0 {
		return fmt.Errorf("the OCI layout %s holds no image", *dir)
	}
	for _, desc := range m.Manifests {
		ref := desc.Annotations["org.opencontainers.image.ref.name"]
		if ref == "" {
			return fmt.Errorf("the OCI layout %s has an entry (%s) without org.opencontainers.image.ref.name", *dir, desc.Digest)
		}
		src, err := name.NewTag(ref)
		if err != nil {
			return fmt.Errorf("the OCI layout's ref.name %q: %w", ref, err)
		}
		dst, err := name.NewTag(*reg + "/" + src.RepositoryStr() + ":" + src.TagStr())
		if err != nil {
			return err
		}
		idx, err := top.ImageIndex(desc.Digest)
		if err != nil {
			return fmt.Errorf("%s: %w (push takes image indexes only)", ref, err)
		}
		if err := remote.WriteIndex(dst, idx); err != nil {
			return fmt.Errorf("pushing %s to %s: %w", ref, dst, err)
		}
		fmt.Fprintf(stdout, "%s %s\n", ref, desc.Digest)
	}
	return nil
}
