// Package sysroot maps the absolute paths an image spec names on the build
// host (host programs, their libraries and plugins, config files) to the
// files the image builder reads. For an image of the builder's own
// architecture that is the builder's / itself. For another architecture it
// is a directory holding that architecture's Debian packages unpacked
// (build/arm64/sysroot), read as the target system would see it: a
// symbolic link is followed inside the directory, an absolute target from
// its top, so nothing resolves to the builder's own (amd64) files.
package sysroot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxLinks bounds the links one lookup follows, as the kernel's ELOOP does.
const maxLinks = 40

// Root is the tree the spec's absolute host paths are read from. The zero
// value is the builder's own /.
type Root struct {
	dir string
}

// New returns the root at dir; "" or "/" is the builder's own /.
func New(dir string) (Root, error) {
	if dir == "" || filepath.Clean(dir) == "/" {
		return Root{}, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Root{}, fmt.Errorf("sysroot %s: %w", dir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return Root{}, fmt.Errorf("sysroot: %w", err)
	}
	if !st.IsDir() {
		return Root{}, fmt.Errorf("sysroot %s: not a directory", abs)
	}
	return Root{dir: abs}, nil
}

// IsHost reports whether r is the builder's own /.
func (r Root) IsHost() bool { return r.dir == "" }

// String names the root for messages: "/" or its directory.
func (r Root) String() string {
	if r.dir == "" {
		return "/"
	}
	return r.dir
}

// Path returns the file on the builder that the target system calls p
// (absolute): every link on the way resolved inside r, the last one
// included. A missing component ends the resolution, so opening the result
// fails with fs.ErrNotExist naming it. For the builder's own / it is p.
func (r Root) Path(p string) (string, error) {
	return r.path(p, true)
}

// Stat is os.Stat of the file the target calls p.
func (r Root) Stat(p string) (fs.FileInfo, error) {
	hp, err := r.Path(p)
	if err != nil {
		return nil, err
	}
	return os.Stat(hp)
}

// ReadDir is os.ReadDir of the directory the target calls p.
func (r Root) ReadDir(p string) ([]fs.DirEntry, error) {
	hp, err := r.Path(p)
	if err != nil {
		return nil, err
	}
	return os.ReadDir(hp)
}

// Readlink returns the target of the link the target system calls p, as
// written (not resolved): its directories are resolved, p's last element
// is not.
func (r Root) Readlink(p string) (string, error) {
	hp, err := r.path(p, false)
	if err != nil {
		return "", err
	}
	return os.Readlink(hp)
}

// FromHost returns the target's path for a builder's file inside r, and
// false for one outside it (a build output of the repository).
func (r Root) FromHost(hostPath string) (string, bool) {
	if r.dir == "" {
		return hostPath, filepath.IsAbs(hostPath)
	}
	rel, err := filepath.Rel(r.dir, hostPath)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return path.Join("/", filepath.ToSlash(rel)), true
}

func (r Root) path(p string, followLast bool) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("sysroot %s: path %q is not absolute", r, p)
	}
	if r.dir == "" {
		return p, nil
	}
	resolved, err := r.resolve(p, followLast)
	if err != nil {
		return "", err
	}
	return filepath.Join(r.dir, filepath.FromSlash(resolved)), nil
}

// resolve walks p one element at a time under r.dir, replacing each link by
// its target: a relative target is read from the link's directory, an
// absolute one from r's top, and ".." never climbs above it. It returns the
// target system's path of the file.
func (r Root) resolve(p string, followLast bool) (string, error) {
	cur := "/"
	rest := split(p)
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, name)
		if len(rest) == 0 && !followLast {
			return next, nil
		}
		st, err := os.Lstat(filepath.Join(r.dir, filepath.FromSlash(next)))
		if errors.Is(err, fs.ErrNotExist) {
			// Left to the caller's open, whose error names the path.
			return path.Join(append([]string{next}, rest...)...), nil
		}
		if err != nil {
			return "", fmt.Errorf("sysroot %s: resolving %s: %w", r, p, err)
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("sysroot %s: resolving %s: more than %d symbolic links", r, p, maxLinks)
		}
		target, err := os.Readlink(filepath.Join(r.dir, filepath.FromSlash(next)))
		if err != nil {
			return "", fmt.Errorf("sysroot %s: resolving %s: %w", r, p, err)
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		rest = append(split(target), rest...)
	}
	return cur, nil
}

func split(p string) []string {
	var out []string
	for _, e := range strings.Split(p, "/") {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}
