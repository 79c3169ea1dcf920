package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInstallClient: --install installs gate-client beside gate-hook when the image has it
// beside gate-hook, and installs gate-hook alone when it does not (TestInstall).
func TestInstallClient(t *testing.T) {
	image := t.TempDir()
	for _, name := range []string{"gate-hook", celHook} {
		if err := installCopy(filepath.Join(filepath.Dir(hookBin), name), image, name); err != nil {
			t.Fatal(err)
		}
	}
	client := []byte("#!/bin/sh\nexit 2\n")
	if err := os.WriteFile(filepath.Join(image, gateClient), client, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if r := execBinary(t, filepath.Join(image, "gate-hook"), nil, nil, "--install", dir); r.exit != 0 {
		t.Fatalf("--install: %+v", r)
	}
	got, err := os.ReadFile(filepath.Join(dir, gateClient))
	if err != nil || string(got) != string(client) {
		t.Fatalf("installed gate-client %q, %v", got, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, gateClient)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed gate-client: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(installedWithoutClient(t), gateClient)); !os.IsNotExist(err) {
		t.Fatalf("gate-client installed from an image without it: %v", err)
	}
}

// installedWithoutClient installs gate-hook as the tests build it, without gate-client beside it.
func installedWithoutClient(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if r := execBinary(t, hookBin, nil, nil, "--install", dir); r.exit != 0 {
		t.Fatalf("--install: %+v", r)
	}
	return dir
}
