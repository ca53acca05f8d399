package mounts

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// DetectFSType names the filesystem whose superblock starts head (the first
// 2 KiB of an image or more): "erofs", "squashfs", or "" if unknown.
func DetectFSType(head []byte) string {
	// erofs: little-endian magic 0xE0F5E1E2 at byte 1024 (EROFS_SUPER_OFFSET).
	if len(head) >= 1028 && binary.LittleEndian.Uint32(head[1024:]) == 0xE0F5E1E2 {
		return "erofs"
	}
	if len(head) >= 4 && bytes.Equal(head[:4], []byte("hsqs")) {
		return "squashfs"
	}
	return ""
}

func detectImage(image string) (string, error) {
	f, err := os.Open(image)
	if err != nil {
		return "", fmt.Errorf("opening root image: %w", err)
	}
	defer f.Close()
	head := make([]byte, 2048)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("reading root image %s: %w", image, err)
	}
	fs := DetectFSType(head[:n])
	if fs == "" {
		return "", fmt.Errorf("root image %s is neither erofs nor squashfs (no known superblock magic)", image)
	}
	return fs, nil
}

// loopDevice is an attached loop device. Close drops our reference; with
// autoclear set the kernel detaches it once nothing (no mount) uses it,
// so Close it only after mounting, or to give up.
type loopDevice struct {
	Path string
	f    *os.File
}

func (l *loopDevice) Close() error { return l.f.Close() }

// attachLoop attaches image read-only to a free loop device, with
// LOOP_CTL_GET_FREE and LOOP_CONFIGURE (one ioctl instead of SET_FD +
// SET_STATUS, so there is no window with a half-set-up device), falling back
// to the old pair on kernels before 5.8. The loop module must be loaded.
func attachLoop(image string) (*loopDevice, error) {
	img, err := os.Open(image)
	if err != nil {
		return nil, fmt.Errorf("attaching root image to a loop device: %w", err)
	}
	// The loop device keeps its own reference to the file.
	defer img.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("attaching %s to a loop device (is the loop module loaded?): %w", image, err)
	}
	defer ctl.Close()
	var lastErr error
	// Another process may grab the same free device between GET_FREE and
	// CONFIGURE (EBUSY): ask again, a bounded number of times.
	for attempt := 0; attempt < 8; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("attaching %s: LOOP_CTL_GET_FREE on /dev/loop-control: %w", image, err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		f, err := openLoop(dev, n)
		if err != nil {
			return nil, fmt.Errorf("attaching %s: %w", image, err)
		}
		err = configureLoop(f, img, image)
		if err == nil {
			return &loopDevice{Path: dev, f: f}, nil
		}
		f.Close()
		lastErr = fmt.Errorf("attaching %s to %s: %w", image, dev, err)
		if !errors.Is(err, unix.EBUSY) {
			return nil, lastErr
		}
	}
	return nil, lastErr
}

// openLoop opens /dev/loopN, creating the node if devtmpfs has not.
func openLoop(dev string, n int) (*os.File, error) {
	f, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		if err := unix.Mknod(dev, unix.S_IFBLK|0o600, int(unix.Mkdev(7, uint32(n)))); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("creating %s: %w", dev, err)
		}
		f, err = os.OpenFile(dev, os.O_RDONLY, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("opening loop device: %w", err)
	}
	return f, nil
}

func configureLoop(f, img *os.File, name string) error {
	info := unix.LoopInfo64{Flags: unix.LO_FLAGS_READ_ONLY | unix.LO_FLAGS_AUTOCLEAR}
	copy(info.File_name[:len(info.File_name)-1], name)
	cfg := unix.LoopConfig{Fd: uint32(img.Fd()), Info: info}
	err := unix.IoctlLoopConfigure(int(f.Fd()), &cfg)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOTTY) {
		if err != nil {
			return fmt.Errorf("LOOP_CONFIGURE: %w", err)
		}
		return nil
	}
	// Before Linux 5.8: no LOOP_CONFIGURE.
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_SET_FD, int(img.Fd())); err != nil {
		return fmt.Errorf("LOOP_SET_FD: %w", err)
	}
	if err := unix.IoctlLoopSetStatus64(int(f.Fd()), &info); err != nil {
		_ = unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
		return fmt.Errorf("LOOP_SET_STATUS64: %w", err)
	}
	return nil
}
