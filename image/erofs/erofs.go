// Package erofs packs an fstree.Tree into a read-only erofs image with
// mkfs.erofs (erofs-utils), reproducibly: a fixed timestamp, every file owned
// by root, and a filesystem UUID derived from the tree's content, so the same
// tree gives a byte-identical image. berth loop-mounts this image as the real
// root (runc cannot pivot_root out of an initramfs).
package erofs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/berth-node/berth/image/fstree"
)

// Options tune Build.
type Options struct {
	// Mkfs is the mkfs.erofs program; "mkfs.erofs" from PATH when empty.
	Mkfs string
	// MTime is the timestamp every inode gets (seconds since the epoch).
	MTime int64
	// Compressor is the -z argument; "lz4hc" when empty.
	Compressor string
}

// UUID derives a stable filesystem UUID (RFC 4122 form, version 4 bits set)
// from the tree's paths, kinds, modes and contents.
func UUID(tree *fstree.Tree) string {
	h := sha256.New()
	for _, e := range tree.Entries() {
		var hdr [16]byte
		binary.LittleEndian.PutUint64(hdr[0:], uint64(e.Kind))
		binary.LittleEndian.PutUint64(hdr[8:], uint64(e.Perm))
		h.Write([]byte(e.Path))
		h.Write([]byte{0})
		h.Write(hdr[:])
		fileSum := sha256.Sum256(e.Data)
		h.Write(fileSum[:])
		h.Write([]byte(e.Target))
		h.Write([]byte{0})
	}
	s := h.Sum(nil)[:16]
	s[6] = s[6]&0x0f | 0x40
	s[8] = s[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

// Build writes tree as an erofs image at out. It stages the tree in a
// temporary directory beside out (same filesystem, removed afterwards).
func Build(ctx context.Context, tree *fstree.Tree, out string, o Options) error {
	if o.Mkfs == "" {
		o.Mkfs = "mkfs.erofs"
	}
	if o.Compressor == "" {
		o.Compressor = "lz4hc"
	}
	stage, err := os.MkdirTemp(filepath.Dir(out), ".erofs-stage-")
	if err != nil {
		return fmt.Errorf("staging root image for %s: %w", out, err)
	}
	defer os.RemoveAll(stage)
	if err := tree.Materialize(stage); err != nil {
		return fmt.Errorf("staging root image for %s: %w", out, err)
	}
	// The staging dir itself becomes the image's "/": give it the tree's mode.
	if err := os.Chmod(stage, 0o755); err != nil {
		return fmt.Errorf("staging root image for %s: %w", out, err)
	}
	if err := os.Remove(out); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("replacing %s: %w", out, err)
	}
	cmd := exec.CommandContext(ctx, o.Mkfs,
		"-z"+o.Compressor,
		"-T"+strconv.FormatInt(o.MTime, 10),
		"-U"+UUID(tree),
		"--all-root",
		"--quiet",
		out, stage)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("running %s for %s: %w\n%s", o.Mkfs, out, err, b)
	}
	return nil
}
