// Package elfdeps finds the shared libraries (and the program interpreter) an
// ELF binary needs, so the image builder can copy a dynamically linked
// program into the root image without a hand-kept list of libraries.
//
// It follows DT_NEEDED and PT_INTERP transitively, resolving names the way
// the dynamic loader would on Debian x86-64 (DT_RUNPATH/DT_RPATH first, then
// the multiarch and legacy directories). It never runs the binary or ldd, so
// it works for binaries of any architecture the builder can read.
package elfdeps

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// DefaultSearchDirs are where Debian's loader looks when a binary names no
// run path (see /etc/ld.so.conf.d/x86_64-linux-gnu.conf).
var DefaultSearchDirs = []string{
	"/lib/x86_64-linux-gnu",
	"/usr/lib/x86_64-linux-gnu",
	"/lib64",
	"/lib",
	"/usr/lib",
}

// Dep is one file a binary needs at run time.
type Dep struct {
	// Name is the DT_NEEDED or PT_INTERP string, e.g. "libc.so.6".
	Name string
	// Path is where it was found on the build host: the path the loader
	// will look for in the image too, so it is copied to the same place.
	Path string
}

// Resolve returns the closure of shared libraries and interpreters that the
// binaries at paths need, sorted by Path and without duplicates. A static
// binary yields nothing. searchDirs defaults to DefaultSearchDirs when nil.
func Resolve(paths []string, searchDirs []string) ([]Dep, error) {
	if searchDirs == nil {
		searchDirs = DefaultSearchDirs
	}
	seen := map[string]Dep{}
	queue := append([]string(nil), paths...)
	visited := map[string]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if visited[p] {
			continue
		}
		visited[p] = true
		info, err := read(p)
		if err != nil {
			return nil, err
		}
		if info.interp != "" {
			if _, err := os.Stat(info.interp); err != nil {
				return nil, fmt.Errorf("%s: program interpreter %s: %w", p, info.interp, err)
			}
			seen[info.interp] = Dep{Name: info.interp, Path: info.interp}
			queue = append(queue, info.interp)
		}
		dirs := append(expandOrigin(info.runpath, p), searchDirs...)
		for _, lib := range info.needed {
			found, err := find(lib, dirs)
			if err != nil {
				return nil, fmt.Errorf("%s: resolving DT_NEEDED %s: %w", p, lib, err)
			}
			seen[found] = Dep{Name: lib, Path: found}
			queue = append(queue, found)
		}
	}
	for _, p := range paths {
		delete(seen, p)
	}
	out := make([]Dep, 0, len(seen))
	for _, d := range seen {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

type elfInfo struct {
	interp  string
	needed  []string
	runpath []string
}

func read(path string) (elfInfo, error) {
	f, err := elf.Open(path)
	if err != nil {
		return elfInfo{}, fmt.Errorf("reading ELF %s: %w", path, err)
	}
	defer f.Close()
	var info elfInfo
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return elfInfo{}, fmt.Errorf("reading PT_INTERP of %s: %w", path, err)
		}
		info.interp = strings.TrimRight(string(b), "\x00")
	}
	info.needed, err = f.ImportedLibraries()
	if err != nil {
		return elfInfo{}, fmt.Errorf("reading DT_NEEDED of %s: %w", path, err)
	}
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, err := f.DynString(tag)
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return elfInfo{}, fmt.Errorf("reading %v of %s: %w", tag, path, err)
		}
		for _, v := range vals {
			info.runpath = append(info.runpath, filepath.SplitList(v)...)
		}
	}
	return info, nil
}

func expandOrigin(dirs []string, binary string) []string {
	origin := filepath.Dir(binary)
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		d = strings.ReplaceAll(d, "${ORIGIN}", origin)
		out = append(out, strings.ReplaceAll(d, "$ORIGIN", origin))
	}
	return out
}

func find(lib string, dirs []string) (string, error) {
	if strings.Contains(lib, "/") {
		if _, err := os.Stat(lib); err != nil {
			return "", err
		}
		return lib, nil
	}
	for _, d := range dirs {
		p := filepath.Join(d, lib)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in %s", strings.Join(dirs, ":"))
}
