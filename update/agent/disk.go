package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/mounts"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/mounts/raid"
	"github.com/berth-node/berth/mounts/verity"
)

// BootDisk is the disk the root was found on: its ESP and root slots, by
// their GPT partition names (image/disk's layout), on that disk only, so
// that another berth disk attached to the machine is never written.
type BootDisk struct {
	// ClassBlock is sysfs's /sys/class/block.
	ClassBlock string
	// Disk is the boot disk's /dev path (the running slot's disk).
	Disk string
	// MountDir is where the ESP is mounted while berth writes it.
	MountDir string
	// Log says when a busy ESP had to be detached; nil discards.
	Log *slog.Logger
}

// find is the partition named name on the boot disk.
func (d BootDisk) find(name string) (string, error) {
	cs, err := partition.FindNamedDisks(d.ClassBlock, name)
	if err != nil {
		return "", fmt.Errorf("finding partition %s: %w", name, err)
	}
	var on []string
	for _, c := range cs {
		if c.Disk == d.Disk {
			on = append(on, c.Partition)
		}
	}
	switch len(on) {
	case 0:
		return "", fmt.Errorf("no partition named %s on the boot disk %s", name, d.Disk)
	case 1:
		return on[0], nil
	}
	return "", fmt.Errorf("%d partitions named %s on the boot disk %s (%s): not choosing one", len(on), name, d.Disk, strings.Join(on, ", "))
}

// Slot is slot s's partition and its size in bytes (sysfs's size is in
// 512-byte sectors whatever the device's block size).
func (d BootDisk) Slot(s partition.Slot) (string, int64, error) {
	dev, err := d.find(s.PartName())
	if err != nil {
		return "", 0, err
	}
	b, err := os.ReadFile(filepath.Join(d.ClassBlock, filepath.Base(dev), "size"))
	if err != nil {
		return "", 0, fmt.Errorf("the size of %s: %w", dev, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("the size of %s: %w", dev, err)
	}
	return dev, n * 512, nil
}

// MountESP mounts the ESP (vfat) on MountDir, without exec, suid or
// device files; unmount syncs and unmounts it. A mount already on
// MountDir (one an unmount could not take off, or one berth left when it
// restarted mid-write) is taken off first: left there, it would refuse
// every later mount with EBUSY, and a trial boot could never be blessed.
func (d BootDisk) MountESP(ctx context.Context) (string, func() error, error) {
	dev, err := d.find(partition.NameESP)
	if err != nil {
		return "", nil, err
	}
	log := d.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	unmount, err := mountESPOn(ctx, log, dev, d.MountDir, mountESP)
	if err != nil {
		return "", nil, err
	}
	return d.MountDir, unmount, nil
}

// mountESPOn mounts dev on dir with mount (mountESP; a test's is
// another filesystem's, the host's kernel having no vfat), a mount left
// on dir taken off first.
func mountESPOn(ctx context.Context, log *slog.Logger, dev, dir string, mount func(dev, dir string) error) (func() error, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("mounting the ESP %s: %w", dev, err)
	}
	if mounts.IsMountPoint(dir) {
		log.Warn("update: a mount left on the ESP's directory, taken off first", "dir", dir, "dev", dev)
		if err := unmountESP(ctx, log, dir); err != nil {
			return nil, fmt.Errorf("mounting the ESP %s on %s, which holds a mount already: %w", dev, dir, err)
		}
	}
	if err := mount(dev, dir); err != nil {
		return nil, err
	}
	return func() error { return unmountESP(ctx, log, dir) }, nil
}

func mountESP(dev, dir string) error {
	// The kernel asks /sbin/modprobe for vfat and its code pages
	// (nls_cp437, nls_ascii) at the first mount.
	// dirsync: vfat writes a directory's entries (a stage's or a
	// blessing's rename) at once, not when its buffers are flushed; esp
	// also syncs the filesystem after each rename.
	if err := unix.Mount(dev, dir, "vfat", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_DIRSYNC, "umask=0077"); err != nil {
		return fmt.Errorf("mounting the ESP %s (vfat) on %s: %w", dev, dir, err)
	}
	return nil
}

// espBusyFor is how long an unmount of a busy ESP is tried before the
// ESP is detached.
const espBusyFor = 3 * time.Second

// unmountESP unmounts the ESP from dir; nothing mounted there is not an
// error. The kernel refuses the unmount (EBUSY) while any process holds
// a file of it, and berth's own children do for a moment: a process
// berth forks (iptables, a service) holds a copy of each of berth's open
// files, a directory of the ESP's among them, until its exec. So a busy
// ESP is tried again for espBusyFor, then synced and detached
// (MNT_DETACH): it leaves dir at once, and the kernel unmounts it when
// the last holder lets go, with nothing of berth's left to write.
func unmountESP(ctx context.Context, log *slog.Logger, dir string) error {
	deadline := time.Now().Add(espBusyFor)
	for delay := 20 * time.Millisecond; ; delay *= 2 {
		err := unix.Unmount(dir, 0)
		if err == nil || errors.Is(err, unix.EINVAL) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("unmounting the ESP from %s: %w", dir, err)
		}
		if time.Now().Add(delay).After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
	if err := syncFS(dir); err != nil {
		return fmt.Errorf("unmounting the ESP from %s, busy for %s: %w", dir, espBusyFor, err)
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting the ESP from %s, busy for %s, detaching it: %w", dir, espBusyFor, err)
	}
	log.Warn("update: the ESP was busy, detached after syncing", "dir", dir, "busy_for", espBusyFor)
	return nil
}

// syncFS writes the filesystem mounted on dir to its disk.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing: %w", err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// verifyName is the dm-verity device an update's check sets up over the
// slot it wrote; the root's own is diskboot.VerityName.
const verifyName = "berth-update-verify"

// VerifySlot checks slot dev through the kernel's dm-verity with p, as
// the next boot will: a read-only verity device over it, read whole (a
// block that does not match fails its read), then removed. It returns the
// bytes of the slot image it vouches for (its data and hash tree).
func VerifySlot(ctx context.Context, log *slog.Logger, dev string, p verity.Param) (n int64, err error) {
	// A device left by a check that was cut off (berth restarted mid-way)
	// goes first; its absence is not an error.
	_ = raid.Remove(ctx, raid.ControlPath, verifyName)
	vdev, err := verity.Setup(ctx, log, raid.ControlPath, verifyName, p.On(dev))
	if err != nil {
		return 0, fmt.Errorf("checking slot %s through dm-verity: %w", dev, err)
	}
	defer func() {
		if rerr := raid.Remove(ctx, raid.ControlPath, verifyName); rerr != nil && err == nil {
			err = fmt.Errorf("removing the check's dm-verity device over %s: %w", dev, rerr)
		}
	}()
	if err := verity.ReadAll(ctx, vdev); err != nil {
		return 0, fmt.Errorf("checking slot %s through dm-verity: %w", dev, err)
	}
	return int64(p.DataBlocks+verity.TreeBlocks(p.DataBlocks)) * verity.BlockSize, nil
}
