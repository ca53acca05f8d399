package supervise

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// waitCreated returns once path exists, or with ctx's error when ctx ends
// first. It sleeps on inotify in path's directory rather than polling, so
// waiting costs PID 1 one wake-up, not one per poll: under TCG each Go
// wake-up is dear, and a 10 ms poll measured worse than the 200 ms probe
// interval it replaced. When the directory itself is missing (the service
// has not made it yet) it returns the stat error at once, and the caller's
// own retry interval is the fallback.
func waitCreated(ctx context.Context, path string) error {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("inotify for %s: %w", path, err)
	}
	// A non-blocking inotify fd is pollable: os.File reads park on Go's
	// netpoller and honour read deadlines.
	f := os.NewFile(uintptr(fd), "inotify")
	defer f.Close()
	dir, name := filepath.Split(path)
	if _, err := unix.InotifyAddWatch(fd, filepath.Clean(dir), unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		return fmt.Errorf("watching %s for %s: %w", dir, name, err)
	}
	// Created between the first stat and the watch?
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("waiting for %s: %w", path, err)
		}
		if eventNamed(buf[:n], name) {
			return nil
		}
	}
}

// eventNamed reports whether the inotify events in b include one for name.
func eventNamed(b []byte, name string) bool {
	for len(b) >= unix.SizeofInotifyEvent {
		// struct inotify_event: wd, mask, cookie, then len, in host order.
		end := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:16]))
		if end > len(b) || end < unix.SizeofInotifyEvent {
			return false
		}
		raw := b[unix.SizeofInotifyEvent:end]
		// The name is NUL-padded to the event's length.
		if unix.ByteSliceToString(raw) == name {
			return true
		}
		b = b[end:]
	}
	return false
}
