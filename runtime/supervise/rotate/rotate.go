// Package rotate writes a service's log to a file that is rotated by size
// (path, path.1, ... path.K), so /var/log/berth cannot fill the disk
// however long a service chatters.
//
// The log is an append stream, so it is written in place rather than with
// fsutil.WriteFileAtomic; rotation itself is a rename, which is atomic.
package rotate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// Rename is one step of a rotation.
type Rename struct{ From, To string }

// Plan returns the renames that rotate path keeping keep old files, in the
// order they must run: oldest first, so no file is overwritten before it
// has moved on. The file that was path.keep is replaced by the last-but-one
// and so dropped. With keep < 1 there is nothing to rename; the caller
// truncates.
func Plan(path string, keep int) []Rename {
	if keep < 1 {
		return nil
	}
	out := make([]Rename, 0, keep)
	for i := keep - 1; i >= 1; i-- {
		out = append(out, Rename{From: Name(path, i), To: Name(path, i+1)})
	}
	return append(out, Rename{From: path, To: Name(path, 1)})
}

// Name is the n-th rotated name of path; n == 0 is path itself.
func Name(path string, n int) string {
	if n == 0 {
		return path
	}
	return path + "." + strconv.Itoa(n)
}

// Writer appends to Path and rotates it once it would grow past MaxBytes.
// It is safe for concurrent use; a single Write is never split across files.
type Writer struct {
	path     string
	maxBytes int64
	keep     int

	mu   sync.Mutex
	f    *os.File
	size int64
}

// New returns a writer for path; the file and its directory are created on
// the first write.
func New(path string, maxBytes int64, keep int) *Writer {
	return &Writer{path: path, maxBytes: maxBytes, keep: keep}
}

// Write appends p, rotating first if p would take the file past the limit.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil && w.size > 0 && w.size+int64(len(p)) > w.maxBytes {
		if err := w.rotate(); err != nil {
			return 0, err
		}
	}
	if w.f == nil {
		if err := w.open(); err != nil {
			return 0, err
		}
		if w.size > 0 && w.size+int64(len(p)) > w.maxBytes {
			if err := w.rotate(); err != nil {
				return 0, err
			}
			if err := w.open(); err != nil {
				return 0, err
			}
		}
	}
	n, err := w.f.Write(p)
	w.size += int64(n)
	if err != nil {
		return n, fmt.Errorf("writing log %s: %w", w.path, err)
	}
	return n, nil
}

func (w *Writer) open() error {
	if err := os.MkdirAll(filepath.Dir(w.path), 0o755); err != nil {
		return fmt.Errorf("creating log directory for %s: %w", w.path, err)
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("opening log %s: %w", w.path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat log %s: %w", w.path, err)
	}
	w.f, w.size = f, fi.Size()
	return nil
}

// rotate closes the file and shifts the names; the next write reopens.
func (w *Writer) rotate() error {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	w.size = 0
	if w.keep < 1 {
		if err := os.Truncate(w.path, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("truncating log %s: %w", w.path, err)
		}
		return w.open()
	}
	for _, r := range Plan(w.path, w.keep) {
		if err := os.Rename(r.From, r.To); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotating log %s to %s: %w", r.From, r.To, err)
		}
	}
	return w.open()
}

// Close closes the current file; a later Write reopens it.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return fmt.Errorf("closing log %s: %w", w.path, err)
	}
	return nil
}
