// Package initramfs writes an fstree.Tree as a reproducible newc cpio
// archive, the format the kernel unpacks into its initial rootfs.
//
// Reproducible means the bytes depend only on the tree: entries are sorted,
// owners are 0, every mtime is the one given (0 or SOURCE_DATE_EPOCH), and
// inode numbers are the entry's position, not the build host's.
package initramfs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/u-root/u-root/pkg/cpio"

	"github.com/berth-node/berth/image/fstree"
)

// Write writes tree to w as a newc cpio archive with every mtime set to
// mtime (seconds since the epoch).
func Write(w io.Writer, tree *fstree.Tree, mtime uint64) error {
	bw := bufio.NewWriter(w)
	rw := cpio.Newc.Writer(bw)
	for i, e := range tree.Entries() {
		if e.Path == "/" {
			continue // the kernel's rootfs already exists; "." would only reset its mode
		}
		info := cpio.Info{
			Ino:   uint64(i + 1),
			NLink: 1,
			MTime: mtime,
			Name:  strings.TrimPrefix(e.Path, "/"),
		}
		var rec cpio.Record
		switch e.Kind {
		case fstree.File:
			info.Mode = cpio.S_IFREG | uint64(e.Perm)
			info.FileSize = uint64(len(e.Data))
			rec = cpio.Record{ReaderAt: bytes.NewReader(e.Data), Info: info}
		case fstree.Dir:
			info.Mode = cpio.S_IFDIR | uint64(e.Perm)
			info.NLink = 2
			rec = cpio.Record{ReaderAt: bytes.NewReader(nil), Info: info}
		case fstree.Symlink:
			info.Mode = cpio.S_IFLNK | 0o777
			info.FileSize = uint64(len(e.Target))
			rec = cpio.Record{ReaderAt: strings.NewReader(e.Target), Info: info}
		default:
			return fmt.Errorf("cpio entry %s: unknown kind %d", e.Path, e.Kind)
		}
		if err := rw.WriteRecord(rec); err != nil {
			return fmt.Errorf("writing cpio entry %s: %w", e.Path, err)
		}
	}
	if err := cpio.WriteTrailer(rw); err != nil {
		return fmt.Errorf("writing cpio trailer: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing cpio: %w", err)
	}
	return nil
}
