// Package elfdeps finds the shared libraries (and the program interpreter) an
// ELF binary needs, so the image builder can copy a dynamically linked
// program into the root image without a hand-kept list of libraries.
//
// It follows DT_NEEDED and PT_INTERP transitively, resolving names the way
// Debian's dynamic loader would (DT_RUNPATH/DT_RPATH first, then the
// multiarch directories of the binary's machine, then the legacy ones). It
// never runs the binary or ldd, so it works for binaries of any
// architecture the builder can read, and it reads libraries from a sysroot
// (another architecture's packages unpacked) as from the builder's own /.
package elfdeps

import (
	"debug/elf"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/berth-node/berth/image/elfarch"
	"github.com/berth-node/berth/image/sysroot"
)

// SearchDirs are where Debian's loader looks for a machine's libraries when
// a binary names no run path (/etc/ld.so.conf.d/<tuple>.conf, then the
// built-in directories).
func SearchDirs(m elf.Machine) []string {
	var dirs []string
	if tuple, ok := elfarch.Multiarch(m); ok {
		dirs = append(dirs, "/lib/"+tuple, "/usr/lib/"+tuple)
	}
	if m == elf.EM_X86_64 {
		dirs = append(dirs, "/lib64")
	}
	return append(dirs, "/lib", "/usr/lib")
}

// Dep is one file a binary needs at run time.
type Dep struct {
	// Name is the DT_NEEDED or PT_INTERP string, e.g. "libc.so.6".
	Name string
	// Path is where it was found, in the target system's terms: the path
	// the loader will look for in the image too, so it is copied to the
	// same place.
	Path string
	// Src is the file on the builder holding it: Path itself, or Path
	// under the sysroot.
	Src string
}

// Resolve returns the closure of shared libraries and interpreters that the
// binaries at paths (files on the builder) need, found in root, sorted by
// Path and without duplicates. A static binary yields nothing. searchDirs
// defaults to SearchDirs of each file's machine when nil.
func Resolve(root sysroot.Root, paths []string, searchDirs []string) ([]Dep, error) {
	type item struct{ path, src string }
	var queue []item
	for _, p := range paths {
		tp, ok := root.FromHost(p)
		if !ok {
			tp = p // a build output: $ORIGIN means little for it anyway
		}
		queue = append(queue, item{path: tp, src: p})
	}
	seen := map[string]Dep{}
	visited := map[string]bool{}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		if visited[it.src] {
			continue
		}
		visited[it.src] = true
		info, err := read(it.src)
		if err != nil {
			return nil, err
		}
		if info.interp != "" {
			src, err := regular(root, info.interp)
			if err != nil {
				return nil, fmt.Errorf("%s: program interpreter %s in %s: %w", it.src, info.interp, root, err)
			}
			seen[info.interp] = Dep{Name: info.interp, Path: info.interp, Src: src}
			queue = append(queue, item{path: info.interp, src: src})
		}
		dirs := searchDirs
		if dirs == nil {
			dirs = SearchDirs(info.machine)
		}
		dirs = append(expandOrigin(info.runpath, it.path), dirs...)
		for _, lib := range info.needed {
			found, src, err := find(root, lib, dirs)
			if err != nil {
				return nil, fmt.Errorf("%s: resolving DT_NEEDED %s in %s: %w", it.src, lib, root, err)
			}
			seen[found] = Dep{Name: lib, Path: found, Src: src}
			queue = append(queue, item{path: found, src: src})
		}
	}
	for _, p := range paths {
		if tp, ok := root.FromHost(p); ok {
			delete(seen, tp)
		}
	}
	out := make([]Dep, 0, len(seen))
	for _, d := range seen {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

type elfInfo struct {
	machine elf.Machine
	interp  string
	needed  []string
	runpath []string
}

func read(file string) (elfInfo, error) {
	f, err := elf.Open(file)
	if err != nil {
		return elfInfo{}, fmt.Errorf("reading ELF %s: %w", file, err)
	}
	defer f.Close()
	info := elfInfo{machine: f.Machine}
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return elfInfo{}, fmt.Errorf("reading PT_INTERP of %s: %w", file, err)
		}
		info.interp = strings.TrimRight(string(b), "\x00")
	}
	info.needed, err = f.ImportedLibraries()
	if err != nil {
		return elfInfo{}, fmt.Errorf("reading DT_NEEDED of %s: %w", file, err)
	}
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, err := f.DynString(tag)
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return elfInfo{}, fmt.Errorf("reading %v of %s: %w", tag, file, err)
		}
		for _, v := range vals {
			info.runpath = append(info.runpath, strings.Split(v, ":")...)
		}
	}
	return info, nil
}

// expandOrigin puts the binary's directory (the target's) for $ORIGIN.
func expandOrigin(dirs []string, binary string) []string {
	origin := path.Dir(binary)
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		d = strings.ReplaceAll(d, "${ORIGIN}", origin)
		out = append(out, strings.ReplaceAll(d, "$ORIGIN", origin))
	}
	return out
}

// regular returns the builder's file for the target's p, which must be a
// regular file once its links are followed.
func regular(root sysroot.Root, p string) (string, error) {
	src, err := root.Path(p)
	if err != nil {
		return "", err
	}
	st, err := root.Stat(p)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is no regular file", p)
	}
	return src, nil
}

func find(root sysroot.Root, lib string, dirs []string) (string, string, error) {
	if strings.Contains(lib, "/") {
		src, err := regular(root, lib)
		return lib, src, err
	}
	for _, d := range dirs {
		if !path.IsAbs(d) {
			continue // a relative run path depends on the working directory: the loader's too
		}
		p := path.Join(d, lib)
		if src, err := regular(root, p); err == nil {
			return p, src, nil
		}
	}
	return "", "", fmt.Errorf("not found in %s", strings.Join(dirs, ":"))
}
