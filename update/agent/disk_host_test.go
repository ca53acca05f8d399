package agent

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/internal/syncbuf"
	"github.com/berth-node/berth/mounts"
)

// espLoop is a filesystem on a loop device, detached at the test's end,
// and the mount for it. ext4, not the ESP's vfat: the host's kernel may
// have no vfat (this one has none), and what is tested, the kernel's
// refusal to unmount a busy filesystem and berth's way past it, is the
// same for both; the QEMU tests (TestUpdate, TestRollout) mount the real
// vfat ESP. Needs root and loop devices (CI runs as root).
func espLoop(t *testing.T) (string, func(dev, dir string) error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a vfat loop device and needs root (CI runs as root)")
	}
	img := filepath.Join(t.TempDir(), "esp.img")
	if out, err := exec.Command("mkfs.ext4", "-q", img, "8M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	return dev, func(dev, dir string) error {
		if err := unix.Mount(dev, dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mounting %s on %s: %w", dev, dir, err)
		}
		return nil
	}
}

// holdDir starts a process whose working directory is dir, which keeps
// the filesystem there busy as a child of berth's does between its fork
// and its exec; it ends after d, or at the test's end.
func holdDir(t *testing.T, dir string, d time.Duration) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", fmt.Sprintf("%.3f", d.Seconds()))
	c.Dir = dir
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return c
}

// TestMountESPBusy is the trial boot that could never be blessed: an
// unmount of the ESP refused (EBUSY) because a process held it for a
// moment left it mounted, and every later mount on the same directory
// failed. An ESP busy for a moment is unmounted when it is free; one busy
// for longer is synced and detached, its writes kept; a mount left on the
// directory is taken off before the next mount.
func TestMountESPBusy(t *testing.T) {
	dev, mount := espLoop(t)
	dir := filepath.Join(t.TempDir(), "esp")
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx := context.Background()

	// Busy for a moment (0.2 s, well inside espBusyFor even on a busy
	// host): the unmount waits it out, no detach.
	unmount, err := mountESPOn(ctx, log, dev, dir, mount)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("written before a short hold"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := holdDir(t, dir, 200*time.Millisecond)
	if err := unmount(); err != nil {
		t.Fatalf("unmount while held for 0.2 s: %v", err)
	}
	if mounts.IsMountPoint(dir) {
		t.Fatalf("after the unmount, %s is still a mount point", dir)
	}
	if strings.Contains(logs.String(), "detached") {
		t.Errorf("an ESP busy for 0.2 s was detached, not waited for: %s", logs.String())
	}
	if err := short.Wait(); err != nil {
		t.Fatalf("the holder: %v", err)
	}

	// Busy for longer than espBusyFor: detached, its write on the disk.
	unmount, err = mountESPOn(ctx, log, dev, dir, mount)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte("written before a long hold")
	if err := os.WriteFile(filepath.Join(dir, "b"), want, 0o600); err != nil {
		t.Fatal(err)
	}
	holdDir(t, dir, time.Minute)
	if err := unmount(); err != nil {
		t.Fatalf("unmount while held: %v", err)
	}
	if mounts.IsMountPoint(dir) {
		t.Fatalf("after a detach, %s is still a mount point", dir)
	}
	if !strings.Contains(logs.String(), "the ESP was busy, detached after syncing") {
		t.Errorf("the detach was not logged: %s", logs.String())
	}
	// The filesystem is still held (by the sleeping process) and mounted
	// nowhere in this namespace; a new mount of the device sees the write.
	unmount, err = mountESPOn(ctx, log, dev, dir, mount)
	if err != nil {
		t.Fatalf("mounting again after a detach: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "b"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after a detach, b reads %q, %v; want %q", got, err, want)
	}

	// A mount left on the directory (not unmounted: berth restarted
	// mid-write) is taken off, and the ESP mounted on it once.
	if _, err := mountESPOn(ctx, log, dev, dir, mount); err != nil {
		t.Fatalf("mounting on a directory that holds the ESP already: %v", err)
	}
	if !strings.Contains(logs.String(), "a mount left on the ESP's directory, taken off first") {
		t.Errorf("the mount left behind was not logged: %s", logs.String())
	}
	if err := unmount(); err != nil {
		t.Fatal(err)
	}
	if mounts.IsMountPoint(dir) {
		t.Fatalf("one unmount after the second mount: %s is still a mount point (two mounts stacked?)", dir)
	}
}
