package main

import (
	"debug/elf"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// debianTriples are Debian's multiarch directories (/lib/<triple>) and the ELF machine of each
// GOARCH the images are built for.
var debianTriples = map[string]struct {
	triple  string
	machine elf.Machine
}{
	"amd64": {"x86_64-linux-gnu", elf.EM_X86_64},
	"arm64": {"aarch64-linux-gnu", elf.EM_AARCH64},
}

// sharedLibs returns what the dynamically linked programs need to run in an image with nothing
// else in it: the shared libraries they name (DT_NEEDED) and those name in turn, found where
// Debian's packages put them on this machine and written under /lib/<triple>, and each
// program's dynamic loader (PT_INTERP), at the path the programs name it by. The result is
// sorted, so the same machine writes the same layer.
func sharedLibs(arch string, programs ...string) ([]file, error) {
	t, ok := debianTriples[arch]
	if !ok {
		return nil, fmt.Errorf("no Debian multiarch directory known for GOARCH %s", arch)
	}
	found, interps, err := resolveLibs(t.triple, t.machine, arch, programs)
	if err != nil {
		return nil, err
	}
	return libFiles(t.triple, found, interps)
}

// resolveLibs finds, on this machine, every library the programs need (soname -> path) and the
// dynamic loaders they name.
func resolveLibs(triple string, machine elf.Machine, arch string, programs []string) (map[string]string, map[string]bool, error) {
	searchDirs := []string{"/lib/" + triple, "/usr/lib/" + triple, "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
	found := map[string]string{}
	interps := map[string]bool{}
	var queue []string
	visit := func(p string) error {
		f, err := elf.Open(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		defer f.Close()
		if f.Machine != machine {
			return fmt.Errorf("%s is for %s, the image for %s", p, f.Machine, arch)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				b := make([]byte, prog.Filesz)
				if _, err := prog.ReadAt(b, 0); err != nil {
					return fmt.Errorf("%s: reading PT_INTERP: %w", p, err)
				}
				interp := strings.TrimRight(string(b), "\x00")
				if !path.IsAbs(interp) {
					return fmt.Errorf("%s: a relative PT_INTERP %s", p, interp)
				}
				interps[interp] = true
				queue = append(queue, path.Base(interp))
			}
		}
		needed, err := f.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		queue = append(queue, needed...)
		return nil
	}
	for _, p := range programs {
		if err := visit(p); err != nil {
			return nil, nil, err
		}
	}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if _, ok := found[name]; ok {
			continue
		}
		i := slices.IndexFunc(searchDirs, func(d string) bool { return isFile(filepath.Join(d, name)) })
		if i < 0 {
			return nil, nil, fmt.Errorf("shared library %s: not in %v (install the Debian package that ships it)", name, searchDirs)
		}
		found[name] = filepath.Join(searchDirs[i], name)
		if err := visit(found[name]); err != nil {
			return nil, nil, err
		}
	}
	return found, interps, nil
}

// libFiles lays the libraries out under /lib/<triple> and links each loader path there.
func libFiles(triple string, found map[string]string, interps map[string]bool) ([]file, error) {
	libDir := "lib/" + triple
	files := []file{{path: "lib/", mode: 0o755}, {path: libDir + "/", mode: 0o755}}
	for _, name := range slices.Sorted(maps.Keys(found)) {
		data, err := os.ReadFile(found[name]) // through symbolic links: the library itself
		if err != nil {
			return nil, err
		}
		files = append(files, file{path: libDir + "/" + name, mode: 0o755, data: data})
	}
	dirs := map[string]bool{"lib/": true, libDir + "/": true}
	for _, interp := range slices.Sorted(maps.Keys(interps)) {
		rel := interp[1:]
		if rel == libDir+"/"+path.Base(interp) {
			continue
		}
		var parents []string
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			parents = append(parents, d+"/")
		}
		for _, d := range slices.Backward(parents) {
			if !dirs[d] {
				dirs[d] = true
				files = append(files, file{path: d, mode: 0o755})
			}
		}
		// As on Debian: /lib64/ld-linux-x86-64.so.2 -> /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2.
		files = append(files, file{path: rel, mode: 0o777, link: "/" + libDir + "/" + path.Base(interp)})
	}
	return files, nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
