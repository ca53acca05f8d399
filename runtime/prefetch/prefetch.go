// Package prefetch reads the services' executables into the page cache
// before their first exec. On a compressed read-only root (erofs, lz4hc)
// an exec pays for every page it touches with a fault, a read and a
// decompression, one at a time, on the service's critical path: under
// emulation containerd took 2.5 s from exec to its first log line, and
// its CRI plugin 2 s more to run the shim and runc once. Read ahead on an
// otherwise idle CPU, in order of need, the same pages are minor faults.
//
// The reads run on one OS thread at the lowest priority, so that they
// take only CPU time the boot leaves idle (it mostly waits for DHCP, IMDS
// and the services).
package prefetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// lowest is the nice value of the reading thread.
const lowest = 19

// bufSize is the read size: large enough for few syscalls, small enough
// to stay out of PID 1's heap budget.
const bufSize = 256 << 10

// File is what became of one path.
type File struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
	Ms    int64  `json:"ms"`
	// Missing: the image has no such file (an image without kubelet, say);
	// not an error.
	Missing bool   `json:"missing,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Result is the whole prefetch.
type Result struct {
	Files      []File `json:"files"`
	Bytes      int64  `json:"bytes"`
	DurationMs int64  `json:"durationMs"`
}

// Files reads each path whole, in order, and returns what it read. It
// stops early when ctx ends. Failures are recorded per file and joined in
// the error: a file that cannot be read ahead is only read later, by its
// exec.
func Files(ctx context.Context, log *slog.Logger, paths []string) (Result, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The priority is the thread's: lock it to this goroutine for good, so
	// the runtime ends the thread with it rather than hand a niced thread
	// to other goroutines.
	runtime.LockOSThread()
	if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), lowest); err != nil {
		log.Debug("prefetch runs at normal priority", "err", err)
	}
	start := time.Now()
	res := Result{Files: make([]File, 0, len(paths))}
	buf := make([]byte, bufSize)
	var errs []error
	for _, p := range paths {
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("prefetching %s: %w", p, ctx.Err()))
			break
		}
		f := readFile(p, buf)
		res.Files = append(res.Files, f)
		res.Bytes += f.Bytes
		if f.Error != "" {
			errs = append(errs, errors.New(f.Error))
		}
	}
	res.DurationMs = time.Since(start).Milliseconds()
	return res, errors.Join(errs...)
}

func readFile(path string, buf []byte) File {
	start := time.Now()
	out := File{Path: path}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			out.Missing = true
		} else {
			out.Error = fmt.Sprintf("prefetching %s: %v", path, err)
		}
		return out
	}
	defer f.Close()
	for {
		n, err := f.Read(buf)
		out.Bytes += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			out.Error = fmt.Sprintf("prefetching %s at byte %d: %v", path, out.Bytes, err)
			break
		}
	}
	out.Ms = time.Since(start).Milliseconds()
	return out
}
