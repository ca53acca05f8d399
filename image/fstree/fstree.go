// Package fstree is the image builder's in-memory model of a file tree: what
// goes where, with which mode, from which bytes. The builder fills one tree
// for the root image and one for the initramfs, then hands them to a writer
// (cpio, or a staging directory for mkfs.erofs). Keeping the tree in memory
// means host file metadata (owners, mtimes, umask) never leaks into an image.
package fstree

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/berth-node/berth/config/manifest"
)

// Kind is the type of an entry.
type Kind int

// The kinds of entries a tree holds.
const (
	File Kind = iota
	Dir
	Symlink
)

// Entry is one node of the tree.
type Entry struct {
	// Path is absolute and clean, e.g. "/usr/bin/orphaner".
	Path string
	Kind Kind
	// Perm holds Unix permission bits, setuid/setgid/sticky included
	// (0o7777), as cpio and erofs store them; not Go's fs.FileMode.
	Perm uint32
	// Data is a file's content.
	Data []byte
	// Target is a symlink's target.
	Target string
}

// Tree maps clean absolute paths to entries. The zero value is not usable;
// call New.
type Tree struct {
	entries map[string]*Entry
}

// New returns an empty tree holding only "/".
func New() *Tree {
	return &Tree{entries: map[string]*Entry{"/": {Path: "/", Kind: Dir, Perm: 0o755}}}
}

func clean(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("image path %q is not absolute", p)
	}
	return path.Clean(p), nil
}

// add inserts e, creating missing parents as 0755 directories. Adding a
// path twice is an error unless both are directories (the later perm wins),
// so two spec entries cannot silently shadow each other.
func (t *Tree) add(e Entry) error {
	p, err := clean(e.Path)
	if err != nil {
		return err
	}
	e.Path = p
	if prev, ok := t.entries[p]; ok {
		if prev.Kind == Dir && e.Kind == Dir {
			prev.Perm = e.Perm
			return nil
		}
		return fmt.Errorf("image path %s added twice", p)
	}
	if p != "/" {
		parent := path.Dir(p)
		if pe, ok := t.entries[parent]; ok {
			if pe.Kind != Dir {
				return fmt.Errorf("image path %s: parent %s is not a directory", p, parent)
			}
		} else if err := t.add(Entry{Path: parent, Kind: Dir, Perm: 0o755}); err != nil {
			return err
		}
	}
	t.entries[p] = &e
	return nil
}

// AddDir adds a directory.
func (t *Tree) AddDir(p string, perm uint32) error {
	return t.add(Entry{Path: p, Kind: Dir, Perm: perm & 0o7777})
}

// AddData adds a regular file with the given content.
func (t *Tree) AddData(p string, data []byte, perm uint32) error {
	return t.add(Entry{Path: p, Kind: File, Perm: perm & 0o7777, Data: data})
}

// AddSymlink adds a symbolic link.
func (t *Tree) AddSymlink(p, target string) error {
	return t.add(Entry{Path: p, Kind: Symlink, Perm: 0o777, Target: target})
}

// AddFile copies the host file src (symlinks followed) to p. perm 0 keeps
// the host file's permission bits.
func (t *Tree) AddFile(p, src string, perm uint32) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("adding %s to image: %w", p, err)
	}
	if perm == 0 {
		st, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("adding %s to image: %w", p, err)
		}
		perm = uint32(st.Mode().Perm())
	}
	return t.AddData(p, data, perm)
}

// Has reports whether p is in the tree.
func (t *Tree) Has(p string) bool {
	_, ok := t.entries[path.Clean(p)]
	return ok
}

// Entries returns every entry sorted by path, so that a parent always comes
// before its children and the order never depends on insertion order.
func (t *Tree) Entries() []Entry {
	out := make([]Entry, 0, len(t.entries))
	for _, e := range t.entries {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Manifest lists every non-directory entry as manifest files, with prefix
// prepended to each path (e.g. to name the root image's files by their path
// in the root, the prefix is "").
func (t *Tree) Manifest() []manifest.File {
	var out []manifest.File
	for _, e := range t.Entries() {
		switch e.Kind {
		case File:
			sum := sha256.Sum256(e.Data)
			out = append(out, manifest.File{Path: e.Path, Mode: fmt.Sprintf("%04o", e.Perm), Size: int64(len(e.Data)), SHA256: hex.EncodeToString(sum[:])})
		case Symlink:
			out = append(out, manifest.File{Path: e.Path, Mode: "0777", Link: e.Target})
		}
	}
	return out
}

// Materialize writes the tree under dir (which must be empty or absent),
// setting every permission explicitly so the umask does not leak in.
func (t *Tree) Materialize(dir string) error {
	for _, e := range t.Entries() {
		dst := filepath.Join(dir, filepath.FromSlash(e.Path))
		switch e.Kind {
		case Dir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return fmt.Errorf("staging %s: %w", e.Path, err)
			}
		case File:
			if err := os.WriteFile(dst, e.Data, 0o600); err != nil {
				return fmt.Errorf("staging %s: %w", e.Path, err)
			}
		case Symlink:
			if err := os.Symlink(e.Target, dst); err != nil {
				return fmt.Errorf("staging %s: %w", e.Path, err)
			}
			continue
		}
		if err := os.Chmod(dst, GoMode(e.Perm)); err != nil {
			return fmt.Errorf("staging %s: %w", e.Path, err)
		}
	}
	return nil
}

// GoMode converts an entry's Unix permission bits (0o7777) to Go's
// fs.FileMode.
func GoMode(perm uint32) fs.FileMode {
	m := fs.FileMode(perm & 0o777)
	if perm&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if perm&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if perm&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}
